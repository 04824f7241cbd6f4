/* classes.h: the Ruby classes (src/ruby/), as the core's binding.c lists
 * them: each file's init function, and what some of them do when a run
 * leaves its VM. The core knows them only through those lists. */
#ifndef MM_CLASSES_H
#define MM_CLASSES_H

#include <mruby.h>

#include "run.h"

/* One init function per class file (binding.c calls them in order). */
void mm_apache_init(mrb_state *mrb);  /* rb_apache.c: Apache */
void mm_table_init(mrb_state *mrb);   /* rb_table.c: Apache::Headers_in, ... */
void mm_request_init(mrb_state *mrb); /* rb_request.c: Apache::Request */
void mm_async_init(mrb_state *mrb);   /* rb_async.c: Apache::Async */
/* rb_async.c: the script's next Apache::Async.sleep, if it suspends the
 * request, also ends once fd is ready for events (MM_IO_IN, MM_IO_OUT:
 * run.h). 0 when it would not suspend, or has no room for another. */
int mm_async_wait_io(mrb_state *mrb, int fd, int events);
/* rb_async.c: whether Apache::Async.sleep here would suspend the request
 * (Apache::Async.__suspendable?). */
int mm_async_suspendable(mrb_state *mrb);
/* rb_async.c: when a socket the script's last sleep waited on was seen
 * ready, ending a sleep that had suspended the request (mm_thread_now's
 * clock); 0 when that sleep's time ended it, or it did not suspend. */
apr_time_t mm_async_io_ready(mrb_state *mrb);
/* rb_async.c: how long a wait where the request can be suspended lasts
 * before it suspends, for a service whose answers usually take usual
 * (0: not seen yet). */
apr_interval_time_t mm_async_spin(apr_interval_time_t usual);
/* rb_async.c: what a VM learns of a service's waits (Apache::HTTP's calls
 * to an origin, Apache::Socket's reads of a connection): an average
 * moved a quarter of the way to each new time, and the last two times. */
typedef struct {
    apr_interval_time_t avg, last, prev;
} mm_usual_t;
/* A wait took took (the first one: u all 0). */
void mm_usual_note(mm_usual_t *u, apr_interval_time_t took);
/* The usual time: the least of the average and the last two times (0
 * before the first). */
apr_interval_time_t mm_usual_time(const mm_usual_t *u);
void mm_timer_init(mrb_state *mrb);      /* rb_timer.c: Apache::Timer */
void mm_input_init(mrb_state *mrb);      /* rb_input.c: the body: Request#body, Apache::Input */
void mm_params_init(mrb_state *mrb);     /* rb_params.c: Request#query_params, #form_params */
void mm_connection_init(mrb_state *mrb); /* rb_connection.c: Apache::Connection */
void mm_ssl_init(mrb_state *mrb);        /* rb_ssl.c: Request#ssl?, #ssl_var, Connection#ssl? */
void mm_server_init(mrb_state *mrb);     /* rb_server.c: Apache::Server */
void mm_scoreboard_init(mrb_state *mrb); /* rb_scoreboard.c: Apache::Scoreboard */
void mm_status_init(mrb_state *mrb);     /* rb_status.c: Apache::Status.counters */
void mm_finfo_init(mrb_state *mrb);      /* rb_finfo.c: Apache::Finfo */
void mm_regexp_init(mrb_state *mrb);     /* rb_regexp.c: Regexp (PCRE, for old scripts) */
void mm_cache_init(mrb_state *mrb);      /* rb_cache.c: Apache::Cache */
void mm_filter_init(mrb_state *mrb);     /* rb_filter.c: Apache::Filter */
void mm_authn_init(mrb_state *mrb);      /* rb_authn.c: Apache::AuthnProvider */
void mm_authz_init(mrb_state *mrb);      /* rb_authz.c: Apache::AuthzProvider */
void mm_openssl_init(mrb_state *mrb);    /* rb_openssl.c: OpenSSL, OpenSSL::HMAC, secure compares */
void mm_digest_init(mrb_state *mrb);     /* rb_digest.c: Digest::MD5, SHA1, SHA256, ... */
void mm_base64_init(mrb_state *mrb);     /* rb_base64.c: Base64 */
void mm_random_init(mrb_state *mrb);     /* rb_securerandom.c: SecureRandom */
void mm_pkey_init(mrb_state *mrb);       /* rb_pkey.c: OpenSSL::PKey (after rb_openssl.c) */
void mm_env_init(mrb_state *mrb);        /* rb_env.c: ENV (read-only), Process.pid */
void mm_http_init(mrb_state *mrb);       /* rb_http.c: Apache::HTTP's C half (libcurl) */
void mm_subrequest_init(mrb_state *mrb); /* rb_subrequest.c: Request#subrequest's C half */
void mm_socket_init(mrb_state *mrb);     /* rb_socket.c: Apache::Socket's C half (libcurl) */
void mm_redis_init(mrb_state *mrb);      /* rb_redis.c: Apache::Redis's C half (hiredis) */

/* On leave (mm_binding_leave): forgets $~ and $1..$9, the request's data,
 * so the next script run in the VM, another client's request, does not see
 * them (rb_regexp.c). */
void mm_regexp_forget(mm_vm_t *vm);

/* On a hard stop (mm_binding_stopped), which jumps past the C frames of
 * the run's synchronize blocks: releases the cache locks they still hold
 * (rb_cache.c). */
void mm_cache_release_held(mm_run_t *run);

#endif
