#define _GNU_SOURCE
#ifdef __linux__
#include "CChaosEpoll.h"
#include <errno.h>
#include <stddef.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>
#include <pthread.h>
#include <string.h>

_Static_assert(offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof(__u64) == CHAOS_TCP_INFO_SIZE,
               "CHAOS_TCP_INFO_SIZE must end at tcpi_bytes_retrans");
_Static_assert(offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof(__u32) == CHAOS_TCP_INFO_NOTSENT_END,
               "CHAOS_TCP_INFO_NOTSENT_END must end at tcpi_notsent_bytes");

uint64_t chaos_tcp_info_bytes_sent_once(const chaos_tcp_info *info) {
    uint64_t sent, retransmitted;
    memcpy(&sent, info->bytes + offsetof(struct tcp_info, tcpi_bytes_sent), sizeof sent);
    memcpy(&retransmitted, info->bytes + offsetof(struct tcp_info, tcpi_bytes_retrans), sizeof retransmitted);
    return sent > retransmitted ? sent - retransmitted : 0;
}

uint32_t chaos_tcp_info_notsent_bytes(const chaos_tcp_info *info) {
    uint32_t notsent;
    memcpy(&notsent, info->bytes + offsetof(struct tcp_info, tcpi_notsent_bytes), sizeof notsent);
    return notsent;
}

uint64_t chaos_tcp_info_bytes_received(const chaos_tcp_info *info) {
    uint64_t received;
    memcpy(&received, info->bytes + offsetof(struct tcp_info, tcpi_bytes_received), sizeof received);
    return received;
}

uint32_t chaos_tcp_info_total_retrans(const chaos_tcp_info *info) {
    uint32_t retransmitted;
    memcpy(&retransmitted, info->bytes + offsetof(struct tcp_info, tcpi_total_retrans), sizeof retransmitted);
    return retransmitted;
}

uint64_t chaos_tcp_info_bytes_acked(const chaos_tcp_info *info) {
    uint64_t acked;
    memcpy(&acked, info->bytes + offsetof(struct tcp_info, tcpi_bytes_acked), sizeof acked);
    return acked;
}

int chaos_tcp_info_is_closed(const chaos_tcp_info *info) {
    return info->bytes[offsetof(struct tcp_info, tcpi_state)] == 7; /* TCP_CLOSE in the kernel's tcp_states.h */
}

int chaos_tcp_bytes_acked(int fd, uint64_t *acked, uint32_t *notsent, uint64_t *sent) {
    chaos_tcp_info info;
    socklen_t size = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) < 0) return -errno;
    if (size < CHAOS_TCP_INFO_NOTSENT_END) return -ENOPROTOOPT;
    *acked = chaos_tcp_info_bytes_acked(&info);
    *notsent = chaos_tcp_info_notsent_bytes(&info);
    *sent = chaos_tcp_info_bytes_sent_once(&info);
    return chaos_tcp_info_is_closed(&info);
}

int chaos_epoll_create(void) {
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int add(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = { .events = events, .data = { .u64 = token } };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) < 0 ? -errno : 0;
}

int chaos_epoll_add_stream(int epfd, int fd, uint64_t token) {
    return add(epfd, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, token);
}

int chaos_epoll_add_exclusive(int epfd, int fd, uint64_t token) {
    return add(epfd, fd, EPOLLIN | EPOLLEXCLUSIVE, token);
}

int chaos_epoll_remove(int epfd, int fd) {
    struct epoll_event unused = { 0 };
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &unused) < 0 ? -errno : 0;
}

int chaos_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ready[256];
    if (max > 256) max = 256;
    int count = epoll_wait(epfd, ready, max, timeout_ms);
    if (count < 0) return -errno;
    for (int i = 0; i < count; i++) {
        tokens[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

int chaos_eventfd(void) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int chaos_accept(int fd) {
    int client = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    return client < 0 ? -errno : client;
}

int chaos_tcp_socket(int family) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    return fd < 0 ? -errno : fd;
}
int chaos_splice_pipe(int fds[2], int capacity) {
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return -errno;
    // A larger pipe moves more per wake-up; the system's limit for an unprivileged pipe may refuse it, which is fine.
    (void)fcntl(fds[1], F_SETPIPE_SZ, capacity);
    int size = fcntl(fds[1], F_GETPIPE_SZ);
    if (size <= 0) {
        int error = size < 0 ? errno : EINVAL;
        close(fds[0]);
        close(fds[1]);
        return -error;
    }
    return size;
}

long chaos_splice(int from, int to, unsigned long count) {
    ssize_t moved = splice(from, NULL, to, NULL, count, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    return moved < 0 ? -errno : (long)moved;
}

void chaos_name_thread(const char *name) {
    char short_name[16];
    strncpy(short_name, name, 15);
    short_name[15] = 0;
    pthread_setname_np(pthread_self(), short_name);
}

int chaos_keep_freed_memory(int kept_bytes, int mmap_threshold) {
    return mallopt(M_TRIM_THRESHOLD, kept_bytes) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1;
}
#endif
