#ifndef CCHAOS_EPOLL_H
#define CCHAOS_EPOLL_H

#include <stdint.h>

/// Readiness bits, as epoll reports them.
enum {
    CHAOS_EPOLL_IN = 0x001,
    CHAOS_EPOLL_OUT = 0x004,
    CHAOS_EPOLL_ERR = 0x008,
    CHAOS_EPOLL_HUP = 0x010,
    CHAOS_EPOLL_RDHUP = 0x2000,
};

/// A new epoll instance (close-on-exec), or -errno.
int chaos_epoll_create(void);
/// Registers `fd` edge-triggered for input, output and peer half-close, tagged with `token`.
int chaos_epoll_add_stream(int epfd, int fd, uint64_t token);
/// Registers `fd` level-triggered for input, waking one waiter of all the instances it is in.
int chaos_epoll_add_exclusive(int epfd, int fd, uint64_t token);
/// Removes `fd`.
int chaos_epoll_remove(int epfd, int fd);
/// Waits up to `timeout_ms` (-1: forever, 0: poll) for at most `max` events; fills `tokens` and
/// `events`. Returns the count, or -errno.
int chaos_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeout_ms);
/// A non-blocking, close-on-exec eventfd, or -errno.
int chaos_eventfd(void);
/// Accepts one connection as a non-blocking, close-on-exec socket, or -errno.
int chaos_accept(int fd);
/// A non-blocking, close-on-exec TCP socket of `family`, or -errno.
int chaos_tcp_socket(int family);

/// How much of Linux's `struct tcp_info` the relays read: up to and including `tcpi_bytes_retrans` (Linux 4.19; an
/// older kernel fills up to `tcpi_notsent_bytes`, ``CHAOS_TCP_INFO_NOTSENT_END``, and the rest stays zero).
enum { CHAOS_TCP_INFO_SIZE = 216 };
/// Where `tcpi_notsent_bytes` ends: the least of `TCP_INFO` the relays can use.
enum { CHAOS_TCP_INFO_NOTSENT_END = 148 };

/// The first ``CHAOS_TCP_INFO_SIZE`` bytes of `TCP_INFO`, as `getsockopt` fills them (glibc's
/// `struct tcp_info` stops before `tcpi_bytes_acked`).
typedef struct {
    uint8_t bytes[CHAOS_TCP_INFO_SIZE];
} chaos_tcp_info;

/// `tcpi_bytes_acked` of `info`: the bytes (plus a SYN sent, plus a FIN sent) the peer acknowledged.
uint64_t chaos_tcp_info_bytes_acked(const chaos_tcp_info *info);
/// `tcpi_notsent_bytes` of `info`: bytes written to the socket that TCP has not sent yet.
uint32_t chaos_tcp_info_notsent_bytes(const chaos_tcp_info *info);
/// `tcpi_bytes_sent` less `tcpi_bytes_retrans` of `info`: the payload bytes TCP sent at least once (0 where the
/// kernel does not say). It outlives a reset, which empties the send queue that `tcpi_notsent_bytes` counts.
uint64_t chaos_tcp_info_bytes_sent_once(const chaos_tcp_info *info);
/// `tcpi_bytes_received` of `info`: the payload bytes the socket received (and its TCP acknowledged).
uint64_t chaos_tcp_info_bytes_received(const chaos_tcp_info *info);
/// `tcpi_total_retrans` of `info`: the segments its TCP retransmitted.
uint32_t chaos_tcp_info_total_retrans(const chaos_tcp_info *info);
/// Whether `info` describes a connection that is over (`TCP_CLOSE`: reset, or closed both ways).
int chaos_tcp_info_is_closed(const chaos_tcp_info *info);
/// Reads `tcpi_bytes_acked`, `tcpi_notsent_bytes` and the bytes sent at least once
/// (``chaos_tcp_info_bytes_sent_once``) of socket `fd`; 0 while the connection lives, 1 once it is over
/// (nothing more will be acknowledged), or -errno.
int chaos_tcp_bytes_acked(int fd, uint64_t *acked, uint32_t *notsent, uint64_t *sent);

/// A non-blocking, close-on-exec pipe of `capacity` bytes where the system allows it (`fds[0]` reads, `fds[1]`
/// writes); its size in bytes, or -errno.
int chaos_splice_pipe(int fds[2], int capacity);
/// Moves up to `count` bytes from `from` to `to` (one of them a pipe) inside the kernel, without blocking
/// (`splice(2)`); the bytes moved, 0 at the end of `from`'s input, or -errno.
long chaos_splice(int from, int to, unsigned long count);

/// A datagram peer's address as the kernel gives it (a `sockaddr_in` or `sockaddr_in6` in `bytes`) and its length.
typedef struct {
    uint8_t bytes[28];
    uint32_t length;
} chaos_address;

/// The most datagrams one `chaos_udp_read` or `chaos_udp_send` moves.
enum { CHAOS_UDP_BATCH = 64 };

/// A non-blocking, close-on-exec UDP socket bound to `address` (its port 0: the system picks one); or -errno. Never
/// with SO_REUSEADDR: on UDP it lets another such socket bind the same port (even one the system picks for port 0) and
/// take its datagrams.
int chaos_udp_socket(const chaos_address *address);
/// The local address of socket `fd` into `address`; 0, or -errno.
int chaos_local_address(int fd, chaos_address *address);
/// Reads up to `count` (at most ``CHAOS_UDP_BATCH``) datagrams from `fd` in one `recvmmsg`: datagram i lands at
/// `buffer + i * slot`, its length in `lengths[i]` and its sender in `senders[i]`. Returns how many, or -errno
/// (-EAGAIN: none was waiting).
int chaos_udp_read(int fd, uint8_t *buffer, int slot, int count, uint32_t *lengths, chaos_address *senders);
/// Sends datagrams `first ..< first + count` of a read (as `chaos_udp_read` left them) to `to` in one `sendmmsg`; with
/// `segment`, each run of datagrams of one size (the last may be shorter) as one message the kernel cuts into them
/// again (UDP GSO: the receiver reads the same datagrams). Returns how many datagrams the kernel took, or -errno.
int chaos_udp_send(int fd, const uint8_t *buffer, int slot, const uint32_t *lengths, int first, int count, const chaos_address *to,
                   int segment);

/// How many first bytes of a queued packet are read: an IPv6 header and the longest TCP header.
#define CHAOS_NFQ_HEADER_BYTES 104

/// One packet waiting in the kernel's queue for its verdict: its id, and its first bytes (from the IP header on).
typedef struct {
    uint32_t id;
    uint16_t captured;
    uint8_t header[CHAOS_NFQ_HEADER_BYTES];
} chaos_nfq_packet;

/// A netlink socket bound to the kernel's packet queue `queue_num` (nftables' `queue num`), reading each packet's first
/// ``CHAOS_NFQ_HEADER_BYTES``; at most `max_queued` wait, and a packet past them passes (the queue fails open).
/// Returns the socket, or -errno (-EBUSY: another process holds that queue; -EPERM: no CAP_NET_ADMIN).
int chaos_nfq_open(uint16_t queue_num, uint32_t max_queued);
/// The most packets one netlink datagram of the queue can carry (each message is far more than 64 bytes).
#define CHAOS_NFQ_PER_DATAGRAM 128

/// Waits for at least one queued packet, then takes what else is there, up to `max` (at least
/// ``CHAOS_NFQ_PER_DATAGRAM``: every packet read gets a slot). Returns how many, or -errno.
int chaos_nfq_receive(int fd, chaos_nfq_packet *packets, int max);
/// Gives `count` packets their verdicts (`accept[i]` nonzero: the packet goes on; zero: the kernel drops it), in
/// batches of one send each. Returns 0, or -errno.
int chaos_nfq_verdicts(int fd, uint16_t queue_num, const uint32_t *ids, const uint8_t *accept, int count);

/// Names the calling thread (at most 15 characters are kept).
void chaos_name_thread(const char *name);

/// glibc's allocator keeps up to `kept_bytes` freed at the top of a heap (`M_TRIM_THRESHOLD`) and serves blocks up to
/// `mmap_threshold` bytes from the heap (`M_MMAP_THRESHOLD`). Returns 1 when both were set.
int chaos_keep_freed_memory(int kept_bytes, int mmap_threshold);

#endif
