/* thread.c: the module's own threads in a child (thread.h). */

#include <signal.h>
#include <time.h>

#include "thread.h"

int mm_thread_start(mm_thread_t *t, void *(*fn)(void *), size_t stack)
{
    pthread_condattr_t ca;
    pthread_attr_t ta;
    sigset_t all, saved;
    int rv;

    t->running = 0;
    t->stop = 0;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_init(&ta);
    if (stack) {
        pthread_attr_setstacksize(&ta, stack);
    }
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    rv = pthread_create(&t->thread, &ta, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&ta);
    t->running = rv == 0;
    return rv;
}

void mm_thread_wait_until(mm_thread_t *t, apr_time_t when)
{
    struct timespec ts;

    if (when == MM_NEVER) {
        pthread_cond_wait(&t->cond, &t->lock);
        return;
    }
    ts.tv_sec = (time_t)(when / APR_USEC_PER_SEC);
    ts.tv_nsec = (long)(when % APR_USEC_PER_SEC) * 1000;
    pthread_cond_timedwait(&t->cond, &t->lock, &ts);
}

void mm_thread_stop(mm_thread_t *t)
{
    if (!t->running) {
        return;
    }
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    t->running = 0;
}
