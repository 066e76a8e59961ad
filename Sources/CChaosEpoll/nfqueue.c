// The kernel's packet queue (nfnetlink_queue): packets an nftables rule sends to a queue number wait in the kernel
// until this process gives each a verdict (accept or drop). Spoken over a netlink socket directly: a bind, the
// packets' ids and first bytes, and batches of verdicts.
#define _GNU_SOURCE
#include "CChaosEpoll.h"

#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { NFQ_BUFFER = 8192 };
_Static_assert(NFQ_BUFFER / CHAOS_NFQ_PER_DATAGRAM <= 64, "a packet's message takes more than 64 bytes");

/// Appends attribute `type` with `length` bytes of `data` at `*at` in `buffer`; returns the attribute's aligned size.
static size_t put_attribute(char *buffer, size_t at, uint16_t type, const void *data, uint16_t length) {
    struct nlattr *attribute = (struct nlattr *)(buffer + at);
    attribute->nla_type = type;
    attribute->nla_len = (uint16_t)(NLA_HDRLEN + length);
    memcpy(buffer + at + NLA_HDRLEN, data, length);
    return NLA_ALIGN(attribute->nla_len);
}

/// Starts a queue message of `type` for queue `queue_num` at `at`; returns its size so far.
static size_t begin_message(char *buffer, size_t at, uint16_t type, uint16_t queue_num, uint16_t flags, uint32_t seq) {
    struct nlmsghdr *header = (struct nlmsghdr *)(buffer + at);
    header->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
    header->nlmsg_flags = NLM_F_REQUEST | flags;
    header->nlmsg_seq = seq;
    header->nlmsg_pid = 0;
    struct nfgenmsg *generic = (struct nfgenmsg *)(buffer + at + NLMSG_HDRLEN);
    generic->nfgen_family = AF_UNSPEC;
    generic->version = NFNETLINK_V0;
    generic->res_id = htobe16(queue_num);
    return NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
}

/// Sends one configuration message and waits for the kernel's answer: 0, or its -errno.
static int configure(int fd, char *message, size_t length) {
    ((struct nlmsghdr *)message)->nlmsg_len = (uint32_t)length;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, message, length, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) return -errno;
    char answer[NFQ_BUFFER];
    for (int tries = 0; tries < 16; tries++) {
        ssize_t got = recv(fd, answer, sizeof(answer), 0);
        if (got < 0) return errno == EINTR ? 0 : -errno;
        int remaining = (int)got;
        for (struct nlmsghdr *header = (struct nlmsghdr *)answer; NLMSG_OK(header, remaining);
             header = NLMSG_NEXT(header, remaining)) {
            if (header->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *error = NLMSG_DATA(header);
                return error->error;
            }
        }
    }
    return -EPROTO;
}

int chaos_nfq_open(uint16_t queue_num, uint32_t max_queued) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) return -errno;
    struct sockaddr_nl local = {.nl_family = AF_NETLINK};
    if (bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0) {
        int error = -errno;
        close(fd);
        return error;
    }
    // Packets wait in the socket while the reader gives verdicts: room for a burst (root may pass rmem_max).
    int room = 8 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &room, sizeof(room)) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &room, sizeof(room));
    // Errors of a full socket are not reported to the reader (the queue fails open instead).
    int quiet = 1;
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &quiet, sizeof(quiet));
    char message[256];
    memset(message, 0, sizeof(message));
    size_t length = begin_message(message, 0, NFQNL_MSG_CONFIG, queue_num, NLM_F_ACK, 1);
    struct nfqnl_msg_config_cmd bind_command = {.command = NFQNL_CFG_CMD_BIND, .pf = htobe16(AF_UNSPEC)};
    length += put_attribute(message, length, NFQA_CFG_CMD, &bind_command, sizeof(bind_command));
    int error = configure(fd, message, length);
    if (error < 0) {
        close(fd);
        return error;
    }
    memset(message, 0, sizeof(message));
    length = begin_message(message, 0, NFQNL_MSG_CONFIG, queue_num, NLM_F_ACK, 2);
    // The IP and TCP headers are enough to know a packet's flow and whether it carries bytes.
    struct nfqnl_msg_config_params params = {.copy_range = htobe32(CHAOS_NFQ_HEADER_BYTES), .copy_mode = NFQNL_COPY_PACKET};
    length += put_attribute(message, length, NFQA_CFG_PARAMS, &params, sizeof(params));
    uint32_t maxlen = htobe32(max_queued);
    length += put_attribute(message, length, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof(maxlen));
    // A packet the queue has no room for passes (never a loss nobody drew); without the GSO flag the kernel cuts a
    // large segment into the ones the wire would carry before queueing them.
    uint32_t flags = htobe32(NFQA_CFG_F_FAIL_OPEN);
    length += put_attribute(message, length, NFQA_CFG_MASK, &flags, sizeof(flags));
    length += put_attribute(message, length, NFQA_CFG_FLAGS, &flags, sizeof(flags));
    error = configure(fd, message, length);
    if (error < 0) {
        close(fd);
        return error;
    }
    return fd;
}

/// Reads the packets of one netlink datagram into `packets` (at most `max`); returns how many. The length left is
/// signed: a datagram's last message has no padding after it, so stepping past it takes the length below zero.
static int parse_packets(char *buffer, ssize_t got, chaos_nfq_packet *packets, int max) {
    int count = 0;
    int remaining = (int)got;
    for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, remaining) && count < max;
         header = NLMSG_NEXT(header, remaining)) {
        if ((header->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (header->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE) continue;
        chaos_nfq_packet *packet = &packets[count];
        memset(packet, 0, sizeof(*packet));
        int found = 0;
        size_t offset = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
        while (offset + NLA_HDRLEN <= header->nlmsg_len) {
            struct nlattr *attribute = (struct nlattr *)((char *)header + offset);
            if (attribute->nla_len < NLA_HDRLEN || offset + attribute->nla_len > header->nlmsg_len) break;
            const char *data = (const char *)attribute + NLA_HDRLEN;
            size_t size = attribute->nla_len - NLA_HDRLEN;
            switch (attribute->nla_type & NLA_TYPE_MASK) {
            case NFQA_PACKET_HDR:
                if (size >= sizeof(struct nfqnl_msg_packet_hdr)) {
                    packet->id = be32toh(((const struct nfqnl_msg_packet_hdr *)data)->packet_id);
                    found = 1;
                }
                break;
            case NFQA_PAYLOAD:
                packet->captured = (uint16_t)(size < CHAOS_NFQ_HEADER_BYTES ? size : CHAOS_NFQ_HEADER_BYTES);
                memcpy(packet->header, data, packet->captured);
                break;
            }
            offset += NLA_ALIGN(attribute->nla_len);
        }
        if (found) count++;
    }
    return count;
}

int chaos_nfq_receive(int fd, chaos_nfq_packet *packets, int max) {
    char buffer[NFQ_BUFFER];
    int count = 0;
    // A datagram is read only while every packet it could hold has a slot (none may be left without a verdict).
    while (count == 0 || max - count >= CHAOS_NFQ_PER_DATAGRAM) {
        ssize_t got = recv(fd, buffer, sizeof(buffer), count == 0 ? 0 : MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR || errno == ENOBUFS) continue;
            if (count > 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            return count > 0 ? count : -errno;
        }
        count += parse_packets(buffer, got, packets + count, max - count);
    }
    return count;
}

int chaos_nfq_verdicts(int fd, uint16_t queue_num, const uint32_t *ids, const uint8_t *accept, int count) {
    enum { PER_MESSAGE = 64 };
    char buffer[PER_MESSAGE * 64];
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int sent = 0;
    while (sent < count) {
        size_t at = 0;
        int batch = 0;
        memset(buffer, 0, sizeof(buffer));
        for (; batch < PER_MESSAGE && sent + batch < count; batch++) {
            size_t start = at;
            at += begin_message(buffer, at, NFQNL_MSG_VERDICT, queue_num, 0, 0);
            struct nfqnl_msg_verdict_hdr verdict = {
                .verdict = htobe32(accept[sent + batch] ? NF_ACCEPT : NF_DROP), .id = htobe32(ids[sent + batch])
            };
            at += put_attribute(buffer, at, NFQA_VERDICT_HDR, &verdict, sizeof(verdict));
            ((struct nlmsghdr *)(buffer + start))->nlmsg_len = (uint32_t)(at - start);
            at = NLMSG_ALIGN(at);
        }
        if (sendto(fd, buffer, at, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0 && errno != EINTR) return -errno;
        sent += batch;
    }
    return 0;
}
