/* rb_socket.c: the C half of Apache::Socket, a TCP connection for
 * protocols other than HTTP (Redis, ...). libcurl makes the connection
 * (CURLOPT_CONNECT_ONLY: its resolver, connect timeout, happy eyeballs)
 * and sends and receives on it; the Ruby half (mrblib/socket.rb) buffers,
 * reads lines, keeps idle connections in the VM's pool, and waits by
 * sleeping where a request can be suspended. */

#include "httpd.h"
#include "apr_time.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "binding.h"
#include "classes.h"
#include "curl_defaults.h"
#include "timeout.h"
#include "vm.h"

/* The most bytes one __recv returns. */
#define SOCK_READ_MAX (64 * 1024)

typedef struct {
    CURL *easy; /* NULL once closed */
} sock_t;

static void sock_free(mrb_state *mrb, void *p)
{
    sock_t *s = p;

    if (s) {
        if (s->easy) {
            curl_easy_cleanup(s->easy); /* closes the connection */
        }
        mrb_free(mrb, s);
    }
}

static const mrb_data_type sock_type = {"Apache::Socket", sock_free};

static struct RClass *error_class(mrb_state *mrb, const char *name)
{
    struct RClass *sock = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Socket");

    return mrb_class_get_under(mrb, sock, name);
}

static sock_t *sock_of(mrb_state *mrb, mrb_value self)
{
    sock_t *s = mrb_data_get_ptr(mrb, self, &sock_type);

    if (s == NULL || s->easy == NULL) {
        mrb_raise(mrb, error_class(mrb, "Error"), "Apache::Socket: the connection is closed");
    }
    return s;
}

/* Apache::Socket.__connect(host, port, connect_timeout_ms): a connected
 * socket object, or raises Apache::Socket::ConnectError / Timeout. */
static mrb_value sock_connect(mrb_state *mrb, mrb_value klass)
{
    const char *host;
    mrb_int port, ms;
    sock_t *s;
    mrb_value obj;
    CURLcode rc;
    curl_socket_t fd;
    char url[1100], err[CURL_ERROR_SIZE] = "";
    long left;

    mrb_get_args(mrb, "zii", &host, &port, &ms);
    mm_binding_run(mrb, "Apache::Socket");
    if (port < 1 || port > 65535 || ms < 1 || ms > 86400000) {
        mrb_raise(mrb, E_ARGUMENT_ERROR,
                  "Apache::Socket: port must be 1 to 65535, timeouts 1 to 86400000 ms");
    }
    if (host[0] == '\0' || strlen(host) > 1000 || strpbrk(host, "/?#@ \t\r\n[]") != NULL) {
        if (!(host[0] == '[' && strchr(host, ']') && !strpbrk(host, "/?#@ \t\r\n"))) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Socket: not a host name or address: %s", host);
        }
    }
    /* An IPv6 address goes in brackets in the URL curl parses. */
    snprintf(url, sizeof url, strchr(host, ':') && host[0] != '[' ? "http://[%s]:%d/" : "http://%s:%d/", host,
             (int)port);
    /* A socket the script drops is closed when the collector frees it:
     * counted as IO objects are, so a loop of connections without close
     * gets collections before it runs out of descriptors. */
    mm_vm_before_io(mrb);
    obj = mrb_obj_value(mrb_data_object_alloc(mrb, mrb_class_ptr(klass), NULL, &sock_type));
    s = mrb_malloc(mrb, sizeof *s);
    s->easy = NULL;
    DATA_PTR(obj) = s;
    if (!mm_curl_ready()) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Socket: libcurl could not be initialized");
    }
    if ((s->easy = curl_easy_init()) == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Socket: out of memory");
    }
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_CONNECT_ONLY, 1L);
    mm_curl_defaults(s->easy);
    /* No longer than the script's mrubyTimeout leaves it. */
    left = mm_timeout_ms_left(mrb);
    curl_easy_setopt(s->easy, CURLOPT_CONNECTTIMEOUT_MS, left > 0 && left < (long)ms ? left : (long)ms);
    curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, err);
    rc = curl_easy_perform(s->easy);
    curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, NULL);
    if (rc != CURLE_OK) {
        curl_easy_cleanup(s->easy);
        s->easy = NULL;
        if (rc == CURLE_OPERATION_TIMEDOUT) {
            mm_timeout_expired(mrb); /* the script's own time is up: raises */
        }
        mrb_raisef(mrb, error_class(mrb, rc == CURLE_OPERATION_TIMEDOUT ? "Timeout" : "ConnectError"),
                   "Apache::Socket: %s", err[0] ? err : curl_easy_strerror(rc));
    }
    if (curl_easy_getinfo(s->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD) {
        fd = 0;
    }
    mm_vm_after_io(mrb, 1, (mrb_int)fd);
    return obj;
}

/* Waits up to ms for the socket to be ready for events; 0 if it is not. */
static int wait_ready(CURL *easy, short events, long ms)
{
    curl_socket_t fd;
    struct pollfd p;
    int n;

    if (curl_easy_getinfo(easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD) {
        return 1; /* let send/recv say what is wrong */
    }
    p.fd = fd;
    p.events = events;
    do {
        n = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
    } while (n < 0 && errno == EINTR);
    return n != 0;
}

/* The socket was not ready: the script's next sleep (if it suspends the
 * request) ends as soon as it is. */
static void watch(mrb_state *mrb, CURL *easy, int events)
{
    curl_socket_t fd;

    if (curl_easy_getinfo(easy, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK && fd != CURL_SOCKET_BAD) {
        mm_async_wait_io(mrb, (int)fd, events);
    }
}

/* wait_ms, no longer than the script's mrubyTimeout leaves it. */
static long wait_ms(mrb_state *mrb, mrb_int wait)
{
    long left = mm_timeout_ms_left(mrb);

    return left > 0 && left < (long)wait ? left : (long)wait;
}

/* A read or write failed: the connection is closed (nothing more can be
 * read or written on it in step with the peer), then raises. */
static mrb_noreturn void fail(mrb_state *mrb, sock_t *s, const char *what, CURLcode rc)
{
    curl_easy_cleanup(s->easy);
    s->easy = NULL;
    mrb_raisef(mrb, error_class(mrb, "Error"), "Apache::Socket: %s failed: %s", what, curl_easy_strerror(rc));
}

/* sock.__send(str, wait_ms): the bytes sent (maybe fewer than str's, and 0
 * when the socket was not ready within wait_ms); raises when the
 * connection failed. */
static mrb_value sock_send(mrb_state *mrb, mrb_value self)
{
    sock_t *s = sock_of(mrb, self);
    mrb_value str;
    mrb_int wait;
    size_t sent = 0;
    CURLcode rc;

    mrb_get_args(mrb, "Si", &str, &wait);
    if (RSTRING_LEN(str) == 0) {
        return mrb_fixnum_value(0);
    }
    rc = curl_easy_send(s->easy, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), &sent);
    if (rc == CURLE_AGAIN && wait > 0 && wait_ready(s->easy, POLLOUT, wait_ms(mrb, wait))) {
        rc = curl_easy_send(s->easy, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), &sent);
    }
    if (rc == CURLE_AGAIN) {
        mm_timeout_expired(mrb); /* raises if the script's time is up */
        watch(mrb, s->easy, MM_IO_OUT);
        return mrb_fixnum_value(0);
    }
    if (rc != CURLE_OK) {
        fail(mrb, s, "write", rc);
    }
    return mrb_fixnum_value((mrb_int)sent);
}

/* sock.__recv(max, wait_ms): a String of what arrived (up to max bytes),
 * "" when nothing did within wait_ms, nil at the end of the stream. */
static mrb_value sock_recv(mrb_state *mrb, mrb_value self)
{
    sock_t *s = sock_of(mrb, self);
    mrb_int max, wait;
    char buf[SOCK_READ_MAX];
    size_t got = 0;
    CURLcode rc;

    mrb_get_args(mrb, "ii", &max, &wait);
    if (max < 1 || max > SOCK_READ_MAX) {
        max = SOCK_READ_MAX;
    }
    rc = curl_easy_recv(s->easy, buf, (size_t)max, &got);
    if (rc == CURLE_AGAIN && wait > 0 && wait_ready(s->easy, POLLIN, wait_ms(mrb, wait))) {
        rc = curl_easy_recv(s->easy, buf, (size_t)max, &got);
    }
    if (rc == CURLE_AGAIN) {
        mm_timeout_expired(mrb); /* raises if the script's time is up */
        watch(mrb, s->easy, MM_IO_IN);
        return mrb_str_new_lit(mrb, "");
    }
    if (rc != CURLE_OK) {
        fail(mrb, s, "read", rc);
    }
    return got == 0 ? mrb_nil_value() : mrb_str_new(mrb, buf, (mrb_int)got);
}

/* sock.__close: closes the connection now (idempotent). */
static mrb_value sock_close(mrb_state *mrb, mrb_value self)
{
    sock_t *s = mrb_data_get_ptr(mrb, self, &sock_type);

    if (s && s->easy) {
        curl_easy_cleanup(s->easy);
        s->easy = NULL;
    }
    return mrb_nil_value();
}

static mrb_value sock_closed(mrb_state *mrb, mrb_value self)
{
    sock_t *s = mrb_data_get_ptr(mrb, self, &sock_type);

    return mrb_bool_value(s == NULL || s->easy == NULL);
}

void mm_socket_init(mrb_state *mrb)
{
    struct RClass *sock = mrb_define_class_under(mrb, mm_binding_apache(mrb), "Socket", mrb->object_class);

    MRB_SET_INSTANCE_TT(sock, MRB_TT_DATA);
    mrb_define_class_method(mrb, sock, "__connect", sock_connect, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, sock, "__send", sock_send, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, sock, "__recv", sock_recv, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, sock, "__close", sock_close, MRB_ARGS_NONE());
    mrb_define_method(mrb, sock, "closed?", sock_closed, MRB_ARGS_NONE());
}
