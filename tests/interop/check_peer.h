// What the Linux ends of the interop checks share (ops_check_peer.c, cm_check_peer.c): the run's
// time limit, its clock and the failure line. Each program is one file built on its own, so these
// are static: set g_me and g_start first thing in main.
#pragma once

#include <stdio.h>
#include <time.h>

static const char* g_me = "check_peer";  // the program's name in its messages
static int g_timeout_s = 30;             // -t: the whole run
static struct timespec g_start;

// Seconds since g_start.
static double elapsed(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - g_start.tv_sec) + (double)(t.tv_nsec - g_start.tv_nsec) / 1e9;
}

// Prints "NAME: FAIL: what"; 0, for `return fail(...)` from a check.
static int fail(const char* what) {
  fprintf(stderr, "%s: FAIL: %s\n", g_me, what);
  return 0;
}
