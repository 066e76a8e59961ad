#define _GNU_SOURCE
#ifdef __linux__
#include "CChaosEpoll.h"
#include <errno.h>
#include <stddef.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <pthread.h>
#include <string.h>

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
void chaos_name_thread(const char *name) {
    char short_name[16];
    strncpy(short_name, name, 15);
    short_name[15] = 0;
    pthread_setname_np(pthread_self(), short_name);
}
#endif
