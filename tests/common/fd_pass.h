/*
 * fd_pass.h - one fd over a connected AF_UNIX socket with SCM_RIGHTS, for
 * tests that hand an exported handle to another process.  Goes through the
 * shim's socket calls, like the fd channel.
 */
#ifndef MORI_TEST_FD_PASS_H
#define MORI_TEST_FD_PASS_H

#include <string.h>
#include <sys/socket.h>

#include "mori/hip_shim.h"

/* 0, or -1 if the one-byte message with the fd did not go out. */
static inline int test_send_fd(int sock, int fd) {
  char byte = 'F';
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control); /* the header's padding goes to the kernel too */
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return mori_sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/* The received fd, or -1. */
static inline int test_recv_fd(int sock) {
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  if (mori_recvmsg(sock, &msg, 0) != 1) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

#endif
