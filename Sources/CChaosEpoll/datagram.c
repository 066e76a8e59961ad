#define _GNU_SOURCE
#ifdef __linux__
#include "CChaosEpoll.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(sizeof(struct sockaddr_in6) <= sizeof(((chaos_address *)0)->bytes), "chaos_address must hold a sockaddr_in6");

int chaos_udp_socket(const chaos_address *address) {
    int family = ((const struct sockaddr *)address->bytes)->sa_family;
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) return -errno;
    if (bind(fd, (const struct sockaddr *)address->bytes, address->length) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int chaos_local_address(int fd, chaos_address *address) {
    socklen_t length = sizeof address->bytes;
    memset(address, 0, sizeof *address);
    if (getsockname(fd, (struct sockaddr *)address->bytes, &length) != 0) return -errno;
    address->length = length;
    return 0;
}

int chaos_udp_read(int fd, uint8_t *buffer, int slot, int count, uint32_t *lengths, chaos_address *senders) {
    struct mmsghdr messages[CHAOS_UDP_BATCH];
    struct iovec vectors[CHAOS_UDP_BATCH];
    if (count > CHAOS_UDP_BATCH) count = CHAOS_UDP_BATCH;
    memset(messages, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        vectors[i].iov_base = buffer + (size_t)i * (size_t)slot;
        vectors[i].iov_len = (size_t)slot;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = senders[i].bytes;
        messages[i].msg_hdr.msg_namelen = sizeof senders[i].bytes;
    }
    int read;
    do {
        read = recvmmsg(fd, messages, (unsigned)count, MSG_DONTWAIT, NULL);
    } while (read < 0 && errno == EINTR);
    if (read < 0) return -errno;
    for (int i = 0; i < read; i++) {
        lengths[i] = messages[i].msg_len;
        senders[i].length = messages[i].msg_hdr.msg_namelen;
        // The kernel writes only the address's own length: what lies past it stays as it was, and the address is
        // compared (and hashed) whole.
        if (senders[i].length < sizeof senders[i].bytes)
            memset(senders[i].bytes + senders[i].length, 0, sizeof senders[i].bytes - senders[i].length);
    }
    return read;
}

/// The most datagrams, and bytes, one segmented message carries (UDP_MAX_SEGMENTS; a UDP payload's limit less room).
enum { SEGMENTS_PER_MESSAGE = 64, BYTES_PER_MESSAGE = 65000 };

int chaos_udp_send(int fd, const uint8_t *buffer, int slot, const uint32_t *lengths, int first, int count, const chaos_address *to,
                   int segment) {
    struct mmsghdr messages[CHAOS_UDP_BATCH];
    struct iovec vectors[CHAOS_UDP_BATCH];
    union {
        char bytes[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } controls[CHAOS_UDP_BATCH];
    if (count > CHAOS_UDP_BATCH) count = CHAOS_UDP_BATCH;
    int built = 0;
    for (int i = 0; i < count;) {
        struct msghdr *header = &messages[built].msg_hdr;
        memset(&messages[built], 0, sizeof messages[built]);
        header->msg_name = (void *)to->bytes;
        header->msg_namelen = to->length;
        header->msg_iov = &vectors[i];
        // A run of datagrams of one size (the last may be shorter) goes as one message the kernel cuts again.
        uint32_t size = lengths[first + i];
        size_t total = 0;
        int run = 0;
        do {
            uint32_t length = lengths[first + i + run];
            vectors[i + run].iov_base = (void *)(buffer + (size_t)(first + i + run) * (size_t)slot);
            vectors[i + run].iov_len = length;
            total += length;
            run++;
            if (!segment || length < size || size == 0) break;
        } while (i + run < count && run < SEGMENTS_PER_MESSAGE && lengths[first + i + run] <= size
                 && total + lengths[first + i + run] <= BYTES_PER_MESSAGE);
        header->msg_iovlen = (size_t)run;
        if (run > 1) {
            header->msg_control = controls[built].bytes;
            header->msg_controllen = sizeof controls[built].bytes;
            struct cmsghdr *control = CMSG_FIRSTHDR(header);
            control->cmsg_level = SOL_UDP;
            control->cmsg_type = UDP_SEGMENT;
            control->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t segment_size = (uint16_t)size;
            memcpy(CMSG_DATA(control), &segment_size, sizeof segment_size);
        }
        i += run;
        built++;
    }
    int sent;
    do {
        sent = sendmmsg(fd, messages, (unsigned)built, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) return -errno;
    // How many datagrams the messages the kernel took carried.
    int datagrams = 0;
    for (int m = 0; m < sent; m++) datagrams += (int)messages[m].msg_hdr.msg_iovlen;
    return datagrams;
}
#endif
