/* thread.h: a thread of the module's own in a child (mrubyTimeout's
 * watchdog, the timer thread): started with every signal blocked, waiting
 * on a condition of the monotonic clock, stopped and joined. */
#ifndef MM_THREAD_H
#define MM_THREAD_H

#include "apr_time.h"

#include <pthread.h>
#include <stddef.h>
#include <time.h>

/* No deadline to wait for. */
#define MM_NEVER APR_INT64_MAX

/* The monotonic clock, in microseconds: the clock of every deadline the
 * threads wait for (a change of the time of day moves none of them). */
static inline apr_time_t mm_thread_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (apr_time_t)ts.tv_sec * APR_USEC_PER_SEC + ts.tv_nsec / 1000;
}

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock; /* guards stop, and what the owner adds */
    pthread_cond_t cond;  /* signalled to stop, or for the owner's news */
    int running, stop;
} mm_thread_t;

/* Starts fn in t, with a stack of stack bytes (0: the default). The thread
 * takes no signal: httpd's (a stop, a graceful restart) go to the child's
 * own threads, whose handlers may run a pool cleanup that joins t.
 * Returns 0 or the error of pthread_create. */
int mm_thread_start(mm_thread_t *t, void *(*fn)(void *), size_t stack);

/* With t->lock held: waits until cond is signalled, or until when (the
 * monotonic clock, in microseconds; MM_NEVER: no limit). */
void mm_thread_wait_until(mm_thread_t *t, apr_time_t when);

/* Tells t to stop, wakes it and joins it (nothing if it is not running). */
void mm_thread_stop(mm_thread_t *t);

#endif
