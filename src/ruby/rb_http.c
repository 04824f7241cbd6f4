/* rb_http.c: the C half of Apache::HTTP, an HTTP client on libcurl. A call
 * runs on the VM's curl multi handle (its keep-alive pool), blocking or,
 * where the request can be suspended, with the script asleep between looks
 * at it. A plain call is made here from #request's arguments to its
 * Response (__one); several calls at once (Apache::HTTP.all) and calls
 * that follow redirects go through the Ruby half (mrblib/http.rb), which
 * gives each call as a spec (__spec) and takes, for each, a Response or
 * the Apache::HTTP::Error it failed with. */

#include "httpd.h"

/* curl_multi_socket_all drives the calls as curl_multi_perform does and
 * then tells the socket callback what each socket waits for: the one call
 * that does both, deprecated in favour of an event loop of curl's own.
 * Every loop here drives the multi handle through it or through
 * curl_multi_socket_action, never curl_multi_perform alone, so that what
 * the socket callback last said stays true. */
#define CURL_DISABLE_DEPRECATION

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/variable.h>
#include <mruby/string.h>

#include <curl/curl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "binding.h"
#include "classes.h"
#include "curl_defaults.h"
#include "parse.h"
#include "suspend.h"
#include "thread.h"
#include "timeout.h"
#include "vm.h"

/* A blocking call that mrubyTimeout cuts short ends this long after the
 * run's deadline, so that the deadline has passed when it returns. */
#define HTTP_PAST_DEADLINE_MS 5

/* The defaults of a call's options: the whole call; name resolution,
 * connection and TLS handshake; the most response body bytes. */
#define HTTP_TIMEOUT_MS         10000
#define HTTP_CONNECT_TIMEOUT_MS 5000
#define HTTP_MAX_SIZE           (8 * 1024 * 1024)

/* The most calls one __perform runs at once. */
#define HTTP_MAX_CALLS 64
/* The most bytes of response header lines kept (a backend sending more is
 * refused: TooLarge). */
#define HTTP_MAX_HEADER_BYTES (64 * 1024)
/* Idle connections a VM keeps, and how long an idle one may be reused. */
#define HTTP_POOL_SIZE 16
/* Of those, the most to one origin (scheme, host and port): a connection
 * opened to an origin that has this many already (in use or idle) is
 * closed after its call instead of kept, so that one busy backend does
 * not fill the VM's pool, and a burst of calls does not leave as many
 * idle connections open on the backend. */
#define HTTP_POOL_PER_ORIGIN 8
#define HTTP_IDLE_SEC        30L
/* Easy handles of ended calls a VM keeps for its next calls: making one
 * costs a large zeroed allocation and its buffers. A handle whose call set
 * only the options every call sets (a GET without a body, a CA file or
 * redirects followed by curl) keeps them, the next call setting the ones
 * that differ; any other is reset (curl_easy_reset) and set up anew. A
 * script makes one call at a time in the common case; the handles of more
 * calls at once (all) are made and cleaned up as needed. */
#define HTTP_IDLE_EASY 4
/* The body and header buffers of an ended call are kept for the VM's next
 * call when they are at most this large (a call then allocates nothing for
 * its answer). */
#define HTTP_SPARE_MAX (16 * 1024)

/* The origins whose calls' usual time a VM keeps. */
#define HTTP_USUAL_ORIGINS 8

/* The VM's libcurl state: its multi handle, whose connection cache is the
 * VM's keep-alive pool, the easy handles kept for the next calls, and the
 * last URL that passed the check, parsed (a script mostly calls the same
 * service again: its calls are copies of that, not parsed again). */
typedef struct {
    CURLM *multi;
    CURL *idle[HTTP_IDLE_EASY];
    char idle_set[HTTP_IDLE_EASY];          /* 1: it has the common options, and no other */
    unsigned long idle_url[HTTP_IDLE_EASY]; /* such a handle's last URL: a last_gen, or 0 */
    int nidle;
    char *last_url;
    CURLU *last_parsed;
    unsigned long last_gen;       /* counts the last_url there has been */
    unsigned long last_origin;    /* last_url's origin (origin_key) */
    char *spare_body, *spare_hdr; /* an ended call's buffers (HTTP_SPARE_MAX), or NULL */
    size_t spare_bcap, spare_hcap;
    /* The connections curl holds for the VM's calls (opened by curl's
     * socket option callback, closed by its close callback): their
     * origins, to count them (HTTP_POOL_PER_ORIGIN). */
    struct http_conn {
        curl_socket_t s;
        unsigned long origin;
    } * conns;
    int nconns, capconns;
    /* The sockets of the calls in the multi handle, as its socket callback
     * last said (updated by curl_multi_socket_all): what each waits for,
     * and for which call. A suspended script's sleep ends when its
     * calls' sockets are ready. */
    struct http_sock {
        curl_socket_t s;
        CURL *easy;
        int what; /* CURL_POLL_IN, _OUT, _INOUT */
    } * socks;
    int nsocks, capsocks;
    /* How long the calls to an origin usually take, start to end
     * (mm_usual_time), for the last origins called:
     * how long a suspendable script's calls are waited for before the
     * request is suspended (spin_limit). */
    struct http_usual {
        unsigned long origin;
        mm_usual_t times;
    } usual[HTTP_USUAL_ORIGINS];
    int usual_next; /* the entry the next new origin replaces */
    /* What result_of makes a Response with (found once) */
    struct RClass *http, *response;
    mrb_sym iv_status, iv_lines, iv_body;
} http_vm_t;

/* One call: its easy handle, and what came back. malloc'd memory, owned
 * by the calls' Data object (freed by the GC if a raise skips the end). */
typedef struct {
    CURL *easy;
    CURLU *url;                 /* the URL, parsed once: by the check, then for curl */
    struct curl_slist expect;   /* "Expect:", then the script's fields */
    struct curl_slist *headers; /* those (malloc'd, after expect) */
    char *body;                 /* the response body so far */
    size_t len, cap;            /* its length and room */
    size_t max;                 /* the most body bytes accepted */
    char *hdr;                  /* the last response's header lines, as received */
    size_t hlen, hcap;          /* their length and room */
    int too_large;              /* 1: body over max, 2: headers over the limit */
    int done;                   /* curl reported the call's end */
    int cut;                    /* its timeout is the run's mrubyTimeout's */
    int plain;                  /* only the options every call sets */
    long stall_ms;              /* read_timeout: the most time without a byte moving, or 0 */
    curl_off_t moved;           /* bytes moved either way, as last seen (on_progress) */
    apr_time_t last;            /* when they last moved (mm_thread_now), or the start */
    int stalled;                /* ended by read_timeout */
    unsigned long origin;       /* its URL's origin (origin_key) */
    struct http_calls *owner;   /* the calls it is one of */
    unsigned long gen;          /* its URL is the VM's last_url of this last_gen (0: unknown) */
    CURLcode code;              /* how it ended */
    char err[CURL_ERROR_SIZE];
} http_call_t;

typedef struct http_calls {
    http_vm_t *vm;      /* where the easy handles go back at the end */
    CURLM *multi;       /* the VM's, while the handles are in it (else NULL) */
    request_rec *r;     /* the request whose script sleeps between looks at them
                           (__start), while it lives; else NULL */
    unsigned pause;     /* suspended calls: the last wait between two looks, ms */
    apr_time_t started; /* when they went into the multi handle */
    long longest;       /* the longest timeout of the calls, ms */
    int n;
    http_call_t call[1];
} http_calls_t;

/* A call's buffer (buf, of cap bytes) at its end: kept as the VM's spare
 * (*spare, *scap) when keep, it is small and the VM has none; else freed. */
static void give_spare(int keep, char **spare, size_t *scap, char *buf, size_t cap)
{
    if (keep && buf && cap <= HTTP_SPARE_MAX && *spare == NULL) {
        *spare = buf;
        *scap = cap;
    } else {
        free(buf);
    }
}

/* A new call's buffer (*buf, *cap: none yet) is the VM's spare, if any. */
static void take_spare(char **spare, size_t *scap, char **buf, size_t *cap)
{
    if (*spare) {
        *buf = *spare;
        *cap = *scap;
        *spare = NULL;
    }
}

/* The request of suspended calls is gone (its script never woke). */
static apr_status_t owner_gone(void *p)
{
    ((http_calls_t *)p)->r = NULL;
    return APR_SUCCESS;
}

/* Frees the calls. keep: their easy handles, out of the multi handle,
 * are reset and kept for the VM's next calls as far as there is room (the
 * collector's free, which may run as the VM closes, cleans them up). */
static void calls_release(http_calls_t *calls, int keep)
{
    int i;

    if (calls->r) {
        apr_pool_cleanup_kill(calls->r->pool, calls, owner_gone);
    }

    /* A script that never woke (its request went away while it waited):
     * the handles leave the VM's multi handle before they are freed. */
    for (i = 0; calls->multi && i < calls->n; i++) {
        if (calls->call[i].easy) {
            curl_multi_remove_handle(calls->multi, calls->call[i].easy);
        }
    }
    for (i = 0; i < calls->n; i++) {
        http_call_t *c = &calls->call[i];

        if (c->easy && keep && calls->vm->nidle < HTTP_IDLE_EASY) {
            if (!c->plain) {
                curl_easy_reset(c->easy); /* forgets every option */
            }
            /* (its pointers to c are replaced before its next transfer) */
            calls->vm->idle_set[calls->vm->nidle] = (char)c->plain;
            calls->vm->idle_url[calls->vm->nidle] = c->plain ? c->gen : 0;
            calls->vm->idle[calls->vm->nidle++] = c->easy;
        } else if (c->easy) {
            curl_easy_cleanup(c->easy);
        }
        curl_url_cleanup(c->url);
        curl_slist_free_all(c->headers);
        give_spare(keep, &calls->vm->spare_body, &calls->vm->spare_bcap, c->body, c->cap);
        give_spare(keep, &calls->vm->spare_hdr, &calls->vm->spare_hcap, c->hdr, c->hcap);
    }
    free(calls);
}

static void calls_free(mrb_state *mrb, void *p)
{
    (void)mrb;
    if (p != NULL) {
        calls_release(p, 0);
    }
}

static const mrb_data_type calls_type = {"Apache::HTTP calls", calls_free};

static apr_status_t http_vm_cleanup(void *p)
{
    http_vm_t *h = p;

    while (h->nidle > 0) {
        curl_easy_cleanup(h->idle[--h->nidle]);
    }
    free(h->last_url);
    free(h->spare_body);
    free(h->spare_hdr);
    curl_url_cleanup(h->last_parsed);
    curl_multi_cleanup(h->multi);
    free(h->socks);
    free(h->conns);
    return APR_SUCCESS;
}

/* The multi handle's socket callback: notes what s waits for, and for
 * which easy handle (only compared, never used: it may be gone later). */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    http_vm_t *h = userp;
    int i;

    for (i = 0; i < h->nsocks && h->socks[i].s != s; i++) {
    }
    if (what == CURL_POLL_REMOVE) {
        if (i < h->nsocks) {
            h->socks[i] = h->socks[--h->nsocks];
        }
        return 0;
    }
    if (i == h->nsocks) {
        if (h->nsocks == h->capsocks) {
            int cap = h->capsocks ? 2 * h->capsocks : 8;
            struct http_sock *grown = realloc(h->socks, (size_t)cap * sizeof *grown);

            if (grown == NULL) {
                return 0; /* not watched: the script's sleeps are short for that */
            }
            h->socks = grown;
            h->capsocks = cap;
        }
        h->nsocks++;
    }
    h->socks[i].s = s;
    h->socks[i].easy = easy;
    h->socks[i].what = what;
    return 0;
}

/* A hash of an origin: "scheme://host:port" (the default port said). */
static unsigned long origin_key(CURLU *u)
{
    static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
    unsigned long k = 5381;
    size_t i;

    for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char *part = NULL;
        const char *c;

        if (curl_url_get(u, parts[i], &part, CURLU_DEFAULT_PORT) == CURLUE_OK && part) {
            for (c = part; *c; c++) {
                k = k * 33 + (unsigned char)*c;
            }
        }
        curl_free(part);
        k = k * 33 + '/';
    }
    return k;
}

/* curl made a socket for a new connection of call c: close on exec (as
 * mm_curl_defaults's callback does), counted under its origin; past
 * HTTP_POOL_PER_ORIGIN the connection is closed after the call. */
static int on_sockopt(void *clientp, curl_socket_t s, curlsocktype purpose)
{
    http_call_t *c = clientp;
    http_vm_t *h = c->owner->vm;
    int i, same = 0;

    mm_curl_cloexec(s);
    if (purpose != CURLSOCKTYPE_IPCXN) {
        return CURL_SOCKOPT_OK;
    }
    for (i = 0; i < h->nconns; i++) {
        same += h->conns[i].origin == c->origin;
    }
    if (same >= HTTP_POOL_PER_ORIGIN) {
        curl_easy_setopt(c->easy, CURLOPT_FORBID_REUSE, 1L);
        c->plain = 0; /* reset before the handle's next call */
    }
    if (h->nconns == h->capconns) {
        int cap = h->capconns ? 2 * h->capconns : 16;
        struct http_conn *grown = realloc(h->conns, (size_t)cap * sizeof *grown);

        if (grown == NULL) {
            return CURL_SOCKOPT_OK; /* not counted */
        }
        h->conns = grown;
        h->capconns = cap;
    }
    h->conns[h->nconns].s = s;
    h->conns[h->nconns++].origin = c->origin;
    return CURL_SOCKOPT_OK;
}

/* curl closes a socket (clientp is the VM's state, which outlives every
 * connection of its multi handle). */
static int on_close(void *clientp, curl_socket_t s)
{
    http_vm_t *h = clientp;
    int i;

    for (i = 0; i < h->nconns; i++) {
        if (h->conns[i].s == s) {
            h->conns[i] = h->conns[--h->nconns];
            break;
        }
    }
    return close(s);
}

/* The VM's libcurl state. Made on first use; cleaned up with the VM's
 * pool (after mrb_close, whose collection frees the calls still held).
 * One thread uses a VM at a time (event MPM: under its lock), so it needs
 * no lock. */
static http_vm_t *vm_http(mrb_state *mrb)
{
    mm_vm_t *vm = mm_vm_of(mrb);
    void *p = NULL;
    http_vm_t *h;

    apr_pool_userdata_get(&p, "mm_http_multi", mm_vm_pool_or_raise(mrb, "Apache::HTTP"));
    if (p == NULL) {
        h = apr_pcalloc(vm->pool, sizeof *h);
        if (!mm_curl_ready() || (h->multi = curl_multi_init()) == NULL) {
            mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: libcurl could not be initialized");
        }
        h->http = mrb_module_get_under(mrb, mm_binding_apache(mrb), "HTTP");
        h->response = mrb_class_get_under(mrb, h->http, "Response");
        h->iv_status = mrb_intern_lit(mrb, "@status");
        h->iv_lines = mrb_intern_lit(mrb, "@lines");
        h->iv_body = mrb_intern_lit(mrb, "@body");
        curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)HTTP_POOL_SIZE);
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
        apr_pool_userdata_set(h, "mm_http_multi", http_vm_cleanup, vm->pool);
        p = h;
    }
    return p;
}

/* Appends len bytes to a growing malloc'd buffer; 0 when out of memory. */
static int grow(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n > *cap) {
        size_t want = *cap ? *cap : 4096;
        char *nb;

        while (want < *len + n) {
            want *= 2;
        }
        if ((nb = realloc(*buf, want)) == NULL) {
            return 0;
        }
        *buf = nb;
        *cap = want;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    return 1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    http_call_t *c = ud;
    size_t n = size * nmemb;

    if (c->len + n > c->max) {
        c->too_large = 1;
        return 0; /* curl ends the call: CURLE_WRITE_ERROR */
    }
    return grow(&c->body, &c->len, &c->cap, data, n) ? n : 0;
}

/* Header lines: a status line starts a new response (an interim 100, or a
 * redirect that is followed), whose lines replace the previous ones. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    http_call_t *c = ud;
    size_t n = size * nmemb;

    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        c->hlen = 0;
    }
    if (c->hlen + n > HTTP_MAX_HEADER_BYTES) {
        c->too_large = 2;
        return 0;
    }
    return grow(&c->hdr, &c->hlen, &c->hcap, data, n) ? n : 0;
}

/* read_timeout: a call during which no byte moved for stall_ms ends
 * (CURLE_ABORTED_BY_CALLBACK, reported as a timeout). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    http_call_t *c = ud;
    apr_time_t now = mm_thread_now();

    if (dlnow + ulnow != c->moved) {
        c->moved = dlnow + ulnow;
        c->last = now;
    } else if (now - c->last >= apr_time_from_msec(c->stall_ms)) {
        c->stalled = 1;
        return 1;
    }
    return 0;
}

/* The milliseconds until curl must look at the calls again for a
 * read_timeout to be noticed in time (at most most_ms). */
static long next_look(const http_calls_t *calls, long most_ms)
{
    apr_time_t now = mm_thread_now();
    int i;

    for (i = 0; i < calls->n; i++) {
        const http_call_t *c = &calls->call[i];

        if (c->stall_ms && !c->done) {
            long ms = (long)((c->last + apr_time_from_msec(c->stall_ms) - now + 999) / 1000);

            if (ms < most_ms) {
                most_ms = ms < 0 ? 0 : ms;
            }
        }
    }
    return most_ms;
}

/* Appends "name: value" to l (a copy; "name;" for an empty value, as
 * "name:" would only remove curl's own header); NULL when out of memory. */
static struct curl_slist *header_append(struct curl_slist *l, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *line = malloc(nl + vl + 3);
    struct curl_slist *r;

    if (line == NULL) {
        return NULL;
    }
    memcpy(line, name, nl);
    if (vl) {
        memcpy(line + nl, ": ", 2);
        memcpy(line + nl + 2, value, vl + 1);
    } else {
        memcpy(line + nl, ";", 2);
    }
    r = curl_slist_append(l, line);
    free(line);
    return r;
}

static const char *spec_str(mrb_state *mrb, mrb_value spec, mrb_int i, const char *what)
{
    mrb_value v = mrb_ary_entry(spec, i);

    if (!mrb_string_p(v)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "Apache::HTTP: %s must be a String", what);
    }
    return mrb_string_value_cstr(mrb, &v); /* raises for an embedded NUL */
}

static long spec_ms(mrb_state *mrb, mrb_value spec, mrb_int i, const char *what)
{
    mrb_value v = mrb_ary_entry(spec, i);

    if (!mrb_integer_p(v) || mrb_integer(v) < 1 || mrb_integer(v) > 86400000) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR,
                   "Apache::HTTP: %s must be an Integer of milliseconds, 1 to 86400000", what);
    }
    return (long)mrb_integer(v);
}

/* The first field of every call's list: "Expect:" (no value) turns off
 * curl's wait for a 100 before a large body. Each call links it to its own
 * fields (c->expect); curl only reads it. */
static char expect_off[] = "Expect:";

/* Sets up call c from spec: [method, url, [name, value, ...], body or nil,
 * timeout ms, connect timeout ms, max body bytes, max redirects (0: none),
 * CA file or nil, read timeout ms or nil]. Raises for a bad spec (the Data
 * object frees c). */
static long setup(mrb_state *mrb, http_vm_t *h, http_call_t *c, mrb_value spec, long run_left)
{
    const char *method, *url;
    mrb_value hdrs, body, ca, stall;
    long timeout, connect;
    mrb_int i, max, redirects;
    CURLU *u;
    char *host = NULL, *scheme = NULL;
    CURLUcode uc;
    int set = 0; /* the handle has the common options */

    if (!mrb_array_p(spec) || RARRAY_LEN(spec) != 10) {
        mrb_raise(mrb, E_ARGUMENT_ERROR,
                  "Apache::HTTP: a call is [method, url, headers, body, timeout, "
                  "connect_timeout, max_size, redirects, ca_file, read_timeout]");
    }
    method = spec_str(mrb, spec, 0, "the method");
    url = spec_str(mrb, spec, 1, "the URL");
    if (!mm_parse_header_name_ok(method)) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: %s is not a method name", method);
    }
    /* http and https only, with a host: curl's parser would take
     * "http:///x" as host x, so the authority is checked here first. */
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        const char *a = strstr(url, "://") + 3;

        if (*a == '\0' || *a == '/' || *a == '?' || *a == '#') {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: the URL has no host: %s", url);
        }
    } else {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: only http:// and https:// URLs are fetched: %s",
                   url);
    }
    if (h->last_url && strcmp(h->last_url, url) == 0) {
        /* the same URL as the last that passed: the same parts */
        if ((u = c->url = curl_url_dup(h->last_parsed)) == NULL) {
            mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: out of memory");
        }
        c->gen = h->last_gen;
        c->origin = h->last_origin;
        i = 0;
    } else {
        if ((u = c->url = curl_url()) == NULL) {
            mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: out of memory");
        }
        uc = curl_url_set(u, CURLUPART_URL, url, 0);
        if (uc == CURLUE_OK) {
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
            curl_url_get(u, CURLUPART_HOST, &host, 0);
        }
        i = uc != CURLUE_OK                                                         ? 1
            : scheme == NULL || (strcmp(scheme, "http") && strcmp(scheme, "https")) ? 2
            : host == NULL || host[0] == '\0'                                       ? 3
                                                                                    : 0;
        curl_free(scheme);
        curl_free(host);
        if (i == 0) {
            char *copy = strdup(url);

            c->origin = origin_key(u);
            CURLU *parsed = curl_url_dup(u);

            if (copy && parsed) {
                free(h->last_url);
                curl_url_cleanup(h->last_parsed);
                h->last_url = copy;
                h->last_parsed = parsed;
                h->last_origin = c->origin;
                c->gen = ++h->last_gen;
            } else {
                free(copy);
                curl_url_cleanup(parsed);
            }
        }
    }
    if (i != 0) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: %s: %s",
                   i == 1   ? "not a URL"
                   : i == 2 ? "only http:// and https:// URLs are fetched"
                            : "the URL has no host",
                   url);
    }
    hdrs = mrb_ary_entry(spec, 2);
    body = mrb_ary_entry(spec, 3);
    timeout = spec_ms(mrb, spec, 4, "timeout");
    connect = spec_ms(mrb, spec, 5, "connect_timeout");
    max = mrb_integer_p(mrb_ary_entry(spec, 6)) ? mrb_integer(mrb_ary_entry(spec, 6)) : -1;
    redirects = mrb_integer_p(mrb_ary_entry(spec, 7)) ? mrb_integer(mrb_ary_entry(spec, 7)) : -1;
    ca = mrb_ary_entry(spec, 8);
    stall = mrb_ary_entry(spec, 9);
    if (max < 0 || redirects < 0 || redirects > 20) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: max_size must be >= 0, redirects from 0 to 20");
    }
    if (!mrb_array_p(hdrs) || RARRAY_LEN(hdrs) % 2) {
        mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: headers must be name, value pairs");
    }
    if (!mrb_nil_p(body) && !mrb_string_p(body)) {
        mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: body must be a String or nil");
    }
    if (run_left > 0 && run_left < timeout) {
        /* The script's own time is shorter: the call ends just after it,
         * and http_perform raises Apache::Timeout. */
        timeout = run_left + HTTP_PAST_DEADLINE_MS;
        c->cut = 1;
    }
    if (connect > timeout) {
        connect = timeout;
    }
    c->max = (size_t)max;
    /* the last call's buffers (the Data object frees them on a raise) */
    take_spare(&h->spare_body, &h->spare_bcap, &c->body, &c->cap);
    take_spare(&h->spare_hdr, &h->spare_hcap, &c->hdr, &c->hcap);
    if (h->nidle > 0) {
        c->easy = h->idle[--h->nidle];
        set = h->idle_set[h->nidle];
        if (set && (c->gen == 0 || h->idle_url[h->nidle] != c->gen)) {
            /* curl keeps the last transfer's URL string (it makes it from
             * CURLOPT_CURLU only when it has none): a different URL must
             * not find the last one's */
            curl_easy_setopt(c->easy, CURLOPT_URL, NULL);
        }
    } else if ((c->easy = curl_easy_init()) == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: out of memory");
    }
    for (i = 0; i < RARRAY_LEN(hdrs); i += 2) {
        mrb_value nv = mrb_ary_entry(hdrs, i), vv = mrb_ary_entry(hdrs, i + 1);
        const char *name, *value, *why;
        struct curl_slist *l;

        if (!mrb_string_p(nv) || !mrb_string_p(vv)) {
            mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: header names and values must be Strings");
        }
        name = mrb_string_value_cstr(mrb, &nv);
        if (!mm_parse_header_name_ok(name)) {
            mrb_raise(mrb, E_ARGUMENT_ERROR,
                      "Apache::HTTP: a header name is not a token (CR, LF, space, ...)");
        }
        if (!mm_parse_header_value_ok(RSTRING_PTR(vv), (size_t)RSTRING_LEN(vv))) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: the value of header %s has a control character",
                       name);
        }
        value = mrb_string_value_cstr(mrb, &vv);
        if ((why = mm_parse_request_header_refused(mm_parse_header_kind(name), value)) != NULL) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: header %s %s", name, why);
        }
        l = header_append(c->headers, name, value);
        if (l == NULL) {
            mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: out of memory");
        }
        c->headers = l;
    }
    /* "Expect:" off: curl would wait for a 100 before a large body. */
    c->expect.data = expect_off;
    c->expect.next = c->headers;

    /* The URL as checked above: curl takes its parts from u rather than
     * parse the string again. */
    curl_easy_setopt(c->easy, CURLOPT_CURLU, u);
    if (!set) { /* the same for every call */
        curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c->easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        mm_curl_defaults(c->easy); /* threads: no SIGALRM; close on exec; no proxy from the environment */
        /* close on exec too, and the connections counted by origin */
        curl_easy_setopt(c->easy, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
        curl_easy_setopt(c->easy, CURLOPT_CLOSESOCKETFUNCTION, on_close);
        curl_easy_setopt(c->easy, CURLOPT_CLOSESOCKETDATA, h);
        curl_easy_setopt(c->easy, CURLOPT_MAXAGE_CONN, HTTP_IDLE_SEC);
        curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header);
    }
    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, connect);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, &c->expect);
    curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c); /* see collect */
    curl_easy_setopt(c->easy, CURLOPT_SOCKOPTDATA, c);
    if (redirects > 0) {
        curl_easy_setopt(c->easy, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c->easy, CURLOPT_MAXREDIRS, (long)redirects);
    }
    if (!mrb_nil_p(ca)) {
        curl_easy_setopt(c->easy, CURLOPT_CAINFO, spec_str(mrb, spec, 8, "ca_file"));
    }
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c->easy, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
    }
    if (!mrb_nil_p(stall)) {
        /* curl's progress callback runs each time curl looks at the call:
         * it notes when bytes last moved, and ends a call that has waited
         * too long (the loops that drive the calls look at them by then:
         * next_look) */
        c->stall_ms = spec_ms(mrb, spec, 9, "read_timeout");
        c->last = mm_thread_now();
        curl_easy_setopt(c->easy, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c->easy, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c->easy, CURLOPT_XFERINFODATA, c);
    }
    c->plain =
        redirects == 0 && mrb_nil_p(ca) && mrb_nil_p(body) && mrb_nil_p(stall) && strcmp(method, "GET") == 0;
    if (!mrb_nil_p(body)) {
        curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)RSTRING_LEN(body));
        curl_easy_setopt(c->easy, CURLOPT_COPYPOSTFIELDS, RSTRING_PTR(body));
        if (strcmp(method, "POST") != 0) {
            curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
        }
    }
    return timeout;
}

/* The usual time of the calls to origin, as the VM has seen them: an
 * entry of h->usual, or NULL if it has none. */
static struct http_usual *usual_of(http_vm_t *h, unsigned long origin)
{
    int i;

    for (i = 0; i < HTTP_USUAL_ORIGINS; i++) {
        if (h->usual[i].origin == origin && h->usual[i].times.avg > 0) {
            return &h->usual[i];
        }
    }
    return NULL;
}

/* A call to origin took took: into its times, or a new entry in place of
 * the oldest. */
static void note_time(http_vm_t *h, unsigned long origin, apr_interval_time_t took)
{
    struct http_usual *u = usual_of(h, origin);

    if (u == NULL) {
        u = &h->usual[h->usual_next];
        h->usual_next = (h->usual_next + 1) % HTTP_USUAL_ORIGINS;
        memset(u, 0, sizeof *u);
        u->origin = origin;
    }
    mm_usual_note(&u->times, took);
}

/* Takes curl's news of ended calls. The VM's multi handle may also hold
 * the calls of scripts of this VM that are suspended: each call is found
 * through its handle's private pointer, whoever it belongs to, and the
 * script of another request (cur is the caller's), whose sleep waits for
 * a socket this one has just read, is woken.
 * A call's time, for its origin's usual time, ends now, or, for the calls
 * woken of a script resumed because one of their sockets was seen ready
 * at ready (0: not so), then: how long the request took to be resumed
 * (a worker thread free, the VM's lock) is not the service's time. */
static void collect(CURLM *m, request_rec *cur, const http_calls_t *woken, apr_time_t ready)
{
    CURLMsg *msg;
    http_call_t *c;
    int left;

    if (woken && ready < woken->started) {
        ready = 0; /* the socket of an earlier sleep, for earlier calls */
    }
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg == CURLMSG_DONE &&
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c) == CURLE_OK && c) {
            c->done = 1;
            c->code = msg->data.result;
            note_time(c->owner->vm, c->origin,
                      (c->owner == woken && ready ? ready : mm_thread_now()) - c->owner->started);
            if (c->owner->r && c->owner->r != cur) {
                mm_suspend_poke(c->owner->r);
            }
        }
    }
}

static int all_done(const http_calls_t *calls)
{
    int i;

    for (i = 0; i < calls->n; i++) {
        if (!calls->call[i].done) {
            return 0;
        }
    }
    return 1;
}

static void attach(CURLM *m, http_calls_t *calls)
{
    int i;

    calls->started = mm_thread_now();
    for (i = 0; i < calls->n; i++) {
        curl_multi_add_handle(m, calls->call[i].easy);
    }
    calls->multi = m;
}

static void detach(http_calls_t *calls)
{
    int i;

    for (i = 0; calls->multi && i < calls->n; i++) {
        curl_multi_remove_handle(calls->multi, calls->call[i].easy);
    }
    calls->multi = NULL;
}

/* Blocks until each of the calls has ended (curl enforces their timeouts;
 * a second past the longest, they are given up as a last resort). */
static void drive(CURLM *m, http_calls_t *calls, request_rec *cur)
{
    apr_time_t end = mm_thread_now() + apr_time_from_msec(calls->longest) + apr_time_from_sec(1);
    int running;

    for (;;) {
        if (curl_multi_socket_all(m, &running) != CURLM_OK) {
            break;
        }
        collect(m, cur, NULL, 0);
        if (all_done(calls) || mm_thread_now() > end) {
            break;
        }
        /* curl shortens the wait to its own next timer */
        if (curl_multi_poll(m, NULL, 0, (int)next_look(calls, 1000), NULL) != CURLM_OK) {
            break;
        }
    }
}

/* The class name and message of a failed call. */
static const char *failure(http_call_t *c, const char **cls)
{
    *cls = "Error";
    if (c->too_large == 1) {
        *cls = "TooLarge";
        return "the response body is larger than max_size";
    }
    if (c->too_large == 2) {
        *cls = "TooLarge";
        return "the response headers are larger than 64 KB";
    }
    if (!c->done) {
        return "the call did not complete";
    }
    if (c->stalled) {
        *cls = "Timeout";
        snprintf(c->err, sizeof c->err, "no byte came or went for %ld ms (read_timeout)", c->stall_ms);
        return c->err;
    }
    switch (c->code) {
    case CURLE_OPERATION_TIMEDOUT:
        *cls = "Timeout";
        break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        *cls = "ConnectError";
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
        *cls = "TLSError";
        break;
    default:
        break;
    }
    return c->err[0] ? c->err : curl_easy_strerror(c->code);
}

/* The fields of a response's header lines (hdr, len bytes, as received),
 * [name, value, ...]: "Name: value\r\n"; the status line and the empty
 * last line have no colon (obsolete folded lines are dropped). */
static mrb_value fields_of(mrb_state *mrb, const char *hdr, size_t len)
{
    mrb_value hs = mrb_ary_new(mrb);
    size_t pos = 0;

    while (pos < len) {
        const char *line = hdr + pos, *end = memchr(line, '\n', len - pos), *colon, *v, *ve;

        end = end ? end : hdr + len;
        pos = (size_t)(end - hdr) + 1;
        colon = memchr(line, ':', (size_t)(end - line));
        if (colon == NULL || line[0] == ' ' || line[0] == '\t' || colon == line) {
            continue;
        }
        for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++) {
        }
        for (ve = end; ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'); ve--) {
        }
        mrb_ary_push(mrb, hs, mrb_str_new(mrb, line, colon - line));
        mrb_ary_push(mrb, hs, mrb_str_new(mrb, v, ve - v));
    }
    return hs;
}

/* Apache::HTTP.__fields(lines): the fields of a response's header lines,
 * which a response's Headers splits when first read. */
static mrb_value http_fields(mrb_state *mrb, mrb_value self)
{
    char *p;
    mrb_int n;

    mrb_get_args(mrb, "s", &p, &n);
    return fields_of(mrb, p, (size_t)n);
}

/* What call c gave, as the script sees it: an Apache::HTTP::Response
 * (its Headers made from the header lines when first read), or the
 * Apache::HTTP::Error it failed with (made, not raised). */
static mrb_value result_of(mrb_state *mrb, http_call_t *c)
{
    http_vm_t *h = c->owner->vm;
    const char *cls, *msg;
    mrb_value resp;
    long status = 0;

    if (c->too_large || !c->done || c->code != CURLE_OK) {
        msg = failure(c, &cls);
        return mrb_exc_new_str(mrb, mrb_class_get_under(mrb, h->http, cls), mrb_str_new_cstr(mrb, msg));
    }
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    resp = mrb_obj_value(mrb_obj_alloc(mrb, MRB_TT_OBJECT, h->response));
    mrb_iv_set(mrb, resp, h->iv_status, mrb_fixnum_value(status));
    mrb_iv_set(mrb, resp, h->iv_lines, mrb_str_new(mrb, c->hdr, (mrb_int)c->hlen));
    mrb_iv_set(mrb, resp, h->iv_body, mrb_str_new(mrb, c->body, (mrb_int)c->len));
    return resp;
}

static const char *const http_option_names[] = {"headers",      "body",     "timeout",   "connect_timeout",
                                                "read_timeout", "max_size", "redirects", "ca_file"};
/* Where each goes in the spec (headers: flattened there by spec_of). */
static const int http_option_at[] = {2, 3, 4, 5, 9, 6, 7, 8};

/* One of #request's options, into the spec being made (p: its values). */
static int take_option(mrb_state *mrb, mrb_value key, mrb_value val, void *p)
{
    mrb_value *spec = p;
    size_t i;

    for (i = 0; mrb_symbol_p(key) && i < sizeof http_option_names / sizeof http_option_names[0]; i++) {
        if (strcmp(mrb_sym_name(mrb, mrb_symbol(key)), http_option_names[i]) == 0) {
            if (mrb_test(val)) { /* nil or false: the default */
                spec[http_option_at[i]] = val;
            }
            return 0;
        }
    }
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: unknown option %!v", key);
    return 1;
}

/* The header fields of the headers option (a Hash, or an Array of [name,
 * value] pairs), as [name, value, ...] of Strings (to_s). */
static mrb_value flat_fields(mrb_state *mrb, mrb_value headers)
{
    mrb_value flat, pairs = headers;
    mrb_int i;

    if (mrb_hash_p(headers)) {
        pairs = mrb_funcall(mrb, headers, "to_a", 0);
    } else if (!mrb_array_p(headers)) {
        mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: headers must be a Hash");
    }
    flat = mrb_ary_new_capa(mrb, 2 * RARRAY_LEN(pairs));
    for (i = 0; i < RARRAY_LEN(pairs); i++) {
        mrb_value pair = mrb_ary_entry(pairs, i);

        if (!mrb_array_p(pair) || RARRAY_LEN(pair) != 2) {
            mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: headers must be name, value pairs");
        }
        mrb_ary_push(mrb, flat, mrb_obj_as_string(mrb, mrb_ary_entry(pair, 0)));
        mrb_ary_push(mrb, flat, mrb_obj_as_string(mrb, mrb_ary_entry(pair, 1)));
    }
    return flat;
}

/* The spec of a call (setup's form) from #request's arguments: the method
 * in capitals, the URL, and the options (a Hash: unknown ones refused,
 * nil ones the defaults). */
static mrb_value spec_of(mrb_state *mrb, mrb_value method, mrb_value url, mrb_value opts)
{
    mrb_value v[10], m = mrb_obj_as_string(mrb, method);
    mrb_int i;

    for (i = 0; i < RSTRING_LEN(m) && !(RSTRING_PTR(m)[i] >= 'a' && RSTRING_PTR(m)[i] <= 'z'); i++) {
    }
    if (i < RSTRING_LEN(m)) { /* "get", :post: a copy in capitals */
        m = mrb_str_dup(mrb, m);
        for (; i < RSTRING_LEN(m); i++) {
            if (RSTRING_PTR(m)[i] >= 'a' && RSTRING_PTR(m)[i] <= 'z') {
                RSTRING_PTR(m)[i] = (char)(RSTRING_PTR(m)[i] - 'a' + 'A');
            }
        }
    }
    v[0] = m;
    v[1] = url;
    v[2] = mrb_nil_value();
    v[3] = mrb_nil_value();
    v[4] = mrb_fixnum_value(HTTP_TIMEOUT_MS);
    v[5] = mrb_fixnum_value(HTTP_CONNECT_TIMEOUT_MS);
    v[6] = mrb_fixnum_value(HTTP_MAX_SIZE);
    v[7] = mrb_fixnum_value(0);
    v[8] = mrb_nil_value();
    v[9] = mrb_nil_value();
    if (!mrb_nil_p(opts)) {
        if (!mrb_hash_p(opts)) {
            mrb_raise(mrb, E_TYPE_ERROR, "Apache::HTTP: the options must be a Hash");
        }
        mrb_hash_foreach(mrb, mrb_hash_ptr(opts), take_option, v);
    }
    if (!mrb_integer_p(v[7]) || mrb_integer(v[7]) < 0 || mrb_integer(v[7]) > 20) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: redirects must be from 0 to 20");
    }
    v[2] = mrb_nil_p(v[2]) ? mrb_ary_new(mrb) : flat_fields(mrb, v[2]);
    return mrb_ary_new_from_values(mrb, 10, v);
}

/* Apache::HTTP.__spec(method, url, opts). */
static mrb_value http_spec(mrb_state *mrb, mrb_value self)
{
    mrb_value method, url, opts;

    mrb_get_args(mrb, "ooo", &method, &url, &opts);
    return spec_of(mrb, method, url, opts);
}

/* The calls of specs, set up (raises for a bad spec: the Data object
 * frees what was made). */
static mrb_value make_calls(mrb_state *mrb, http_vm_t *h, const mrb_value *specs, mrb_int n, long run_left)
{
    mrb_value holder;
    http_calls_t *calls;
    mrb_int i;
    long t;

    if (n < 1 || n > HTTP_MAX_CALLS) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: from 1 to %d calls at once", HTTP_MAX_CALLS);
    }
    holder = mrb_obj_value(mrb_data_object_alloc(mrb, mrb->object_class, NULL, &calls_type));
    if ((calls = calloc(1, sizeof *calls + (size_t)(n - 1) * sizeof calls->call[0])) == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::HTTP: out of memory");
    }
    DATA_PTR(holder) = calls;
    calls->vm = h;
    for (i = 0; i < n; i++) {
        calls->n = (int)i + 1;
        calls->call[i].owner = calls;
        t = setup(mrb, h, &calls->call[i], specs[i], run_left);
        calls->longest = t > calls->longest ? t : calls->longest;
    }
    return holder;
}

static http_calls_t *calls_of(mrb_state *mrb, mrb_value h)
{
    http_calls_t *calls = mrb_data_check_get_ptr(mrb, h, &calls_type);

    if (calls == NULL) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::HTTP: not calls in progress");
    }
    return calls;
}

/* Frees the ended calls of holder (out of the multi handle) now, rather
 * than at the next collection; their handles are kept for the next calls. */
static void release_holder(mrb_value holder)
{
    calls_release(DATA_PTR(holder), 1);
    DATA_PTR(holder) = NULL;
}

/* The results of the calls, which are out of the multi handle; frees
 * their memory now rather than at the next collection. */
static mrb_value results(mrb_state *mrb, mrb_value holder)
{
    http_calls_t *calls = DATA_PTR(holder);
    mrb_value out = mrb_ary_new_capa(mrb, calls->n);
    int i, ai = mrb_gc_arena_save(mrb);

    for (i = 0; i < calls->n; i++) {
        mrb_ary_push(mrb, out, result_of(mrb, &calls->call[i]));
        mrb_gc_arena_restore(mrb, ai);
    }
    release_holder(holder);
    return out;
}

/* Runs the calls of holder, blocking, until each has ended; raises
 * Apache::Timeout once they are out of the multi handle if the run's
 * mrubyTimeout cut one short. */
static void perform(mrb_state *mrb, http_vm_t *h, mrb_value holder, request_rec *r)
{
    http_calls_t *calls = DATA_PTR(holder);
    int i;

    /* Nothing raises from here until the handles are out of m again. */
    attach(h->multi, calls);
    drive(h->multi, calls, r);
    detach(calls);
    for (i = 0; i < calls->n; i++) {
        if (calls->call[i].cut && calls->call[i].code == CURLE_OPERATION_TIMEDOUT) {
            mm_timeout_expired(mrb); /* the script's time is up: raises */
        }
    }
}

/* Apache::HTTP.__perform(specs): runs them all at once, blocking; an Array
 * of what each gave (result_of), in order. */
static mrb_value http_perform(mrb_state *mrb, mrb_value self)
{
    mrb_value specs, holder;
    request_rec *r;
    http_vm_t *h;

    mrb_get_args(mrb, "A", &specs);
    r = mm_binding_run(mrb, "Apache::HTTP")->r;
    h = vm_http(mrb);
    holder = make_calls(mrb, h, RARRAY_PTR(specs), RARRAY_LEN(specs), mm_timeout_ms_left(mrb));
    perform(mrb, h, holder, r);
    return results(mrb, holder);
}

/* The most sockets the calls of one __start or __step wait on (a call
 * connecting may try two addresses at once). */
#define HTTP_MAX_FDS (2 * HTTP_MAX_CALLS)

/* Fills fds with the sockets the calls still running wait on, as the
 * socket callback last said; their number, or -1 when a call running has
 * no known socket (resolving a name, say: the caller then drives every
 * call of the multi handle). */
static int own_sockets(const http_calls_t *calls, struct pollfd *fds)
{
    const http_vm_t *h = calls->vm;
    int i, j, n = 0, found;

    for (i = 0; i < calls->n; i++) {
        if (calls->call[i].done) {
            continue;
        }
        found = 0;
        for (j = 0; j < h->nsocks; j++) {
            if (h->socks[j].easy == calls->call[i].easy) {
                if (n == HTTP_MAX_FDS) {
                    return -1;
                }
                fds[n].fd = h->socks[j].s;
                fds[n].events = (short)(((h->socks[j].what & CURL_POLL_IN) ? POLLIN : 0) |
                                        ((h->socks[j].what & CURL_POLL_OUT) ? POLLOUT : 0));
                fds[n++].revents = 0;
                found = 1;
            }
        }
        if (!found) {
            return -1;
        }
    }
    return n;
}

/* How long __start waits for the calls before the script suspends
 * (mm_async_spin): for the slowest usual time of their origins, the least
 * if one has none. */
static apr_interval_time_t spin_limit(http_calls_t *calls)
{
    apr_interval_time_t most = 0;
    int i;

    for (i = 0; i < calls->n; i++) {
        const struct http_usual *u = usual_of(calls->vm, calls->call[i].origin);
        apr_interval_time_t usual;

        if (u == NULL) {
            return mm_async_spin(0);
        }
        usual = mm_usual_time(&u->times);
        most = usual > most ? usual : most;
    }
    return mm_async_spin(most);
}

/* For a script that waits by suspending its request (Apache::Async.sleep):
 * __start(specs) makes the calls and starts them, __step(calls) gives the
 * milliseconds to sleep before it looks again, or nil once every call has
 * ended (at once if they ended within spin_limit of the start: then the
 * request is not suspended), and __finish(calls) gives the results. The script's time asleep
 * does not count for mrubyTimeout, so its deadline does not shorten the
 * calls. */
static void start(http_vm_t *h, http_calls_t *calls, request_rec *r)
{
    CURLM *m = h->multi;
    apr_time_t end;
    int running;

    attach(m, calls);
    end = calls->started + spin_limit(calls);
    /* curl runs a handle just added at once: this starts the calls (and
     * whatever other call's timer is due), and the socket callback says
     * which sockets they wait on. Then only those are waited for and
     * driven: the multi handle may also hold the calls of this VM's
     * suspended scripts, which their own sockets wake. */
    curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
    collect(m, r, NULL, 0);
    while (!all_done(calls) && mm_thread_now() < end) {
        struct pollfd fds[HTTP_MAX_FDS];
        int i, n = own_sockets(calls, fds);

        long wait = (long)((end - mm_thread_now() + 999) / 1000), curl_ms = -1;

        /* until the end of the wait, or curl's next timer */
        curl_multi_timeout(m, &curl_ms);
        wait = curl_ms >= 0 && curl_ms < wait ? curl_ms : wait;
        wait = wait < 1 ? 1 : wait;
        if (n < 0) {
            curl_multi_poll(m, NULL, 0, 1, NULL);
            curl_multi_socket_all(m, &running);
        } else if (poll(fds, (nfds_t)n, (int)wait) > 0) {
            for (i = 0; i < n; i++) {
                short ev = fds[i].revents;

                if (ev) { /* curl reads an error or the end as it reads data */
                    curl_multi_socket_action(
                        m, fds[i].fd,
                        ((ev & (POLLIN | POLLPRI | POLLHUP | POLLERR)) ? CURL_CSELECT_IN : 0) |
                            ((ev & POLLOUT) ? CURL_CSELECT_OUT : 0),
                        &running);
                }
            }
        } else {
            curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        collect(m, r, NULL, 0);
    }
    if (r && !all_done(calls)) {
        /* the script will sleep: should a call end while another request
         * of this VM drives the multi handle, that request wakes it */
        calls->r = r;
        apr_pool_cleanup_register(r->pool, calls, owner_gone, apr_pool_cleanup_null);
    }
}

static mrb_value http_start(mrb_state *mrb, mrb_value self)
{
    mrb_value specs, holder;
    http_vm_t *h;

    mrb_get_args(mrb, "A", &specs);
    h = vm_http(mrb);
    holder = make_calls(mrb, h, RARRAY_PTR(specs), RARRAY_LEN(specs), 0);
    start(h, DATA_PTR(holder), mm_binding_run(mrb, "Apache::HTTP")->r);
    return holder;
}

/* Apache::HTTP.__one(method, url, opts): one call, #request's. Its
 * Response, or raises its Apache::HTTP::Error, when it has ended here
 * (blocking, or within __start's first wait); else, for the Ruby half to
 * finish: the calls in progress (where the script sleeps: __step,
 * __finish), or the call's spec when it follows redirects (__run). */
static mrb_value http_one(mrb_state *mrb, mrb_value self)
{
    mrb_value method, url, opts, spec, holder, res;
    request_rec *r;
    http_vm_t *h;
    int suspend;

    mrb_get_args(mrb, "ooo", &method, &url, &opts);
    spec = spec_of(mrb, method, url, opts);
    if (mrb_integer(RARRAY_PTR(spec)[7]) > 0) {
        return spec;
    }
    r = mm_binding_run(mrb, "Apache::HTTP")->r;
    h = vm_http(mrb);
    suspend = mm_async_suspendable(mrb);
    holder = make_calls(mrb, h, &spec, 1, suspend ? 0 : mm_timeout_ms_left(mrb));
    if (!suspend) {
        perform(mrb, h, holder, r);
    } else {
        start(h, DATA_PTR(holder), r);
        if (!all_done(DATA_PTR(holder))) {
            return holder;
        }
        detach(DATA_PTR(holder));
    }
    res = result_of(mrb, &((http_calls_t *)DATA_PTR(holder))->call[0]);
    release_holder(holder);
    if (mrb_exception_p(res)) {
        mrb_exc_raise(mrb, res);
    }
    return res;
}

/* The waits between two looks: short at first (an answer from a near
 * service comes in a millisecond or two), then longer, at most this. */
#define HTTP_PAUSE_MAX 16
/* The longest sleep when the calls' sockets end it as soon as they are
 * ready: a bound on what a missed wake could cost. */
#define HTTP_WATCHED_MAX 1000

/* Has the script's next sleep end when the sockets of the calls still
 * running are ready: 1 if it will, 0 if some call's socket is not known
 * (or the sleep would not suspend the request). */
static int watch_sockets(mrb_state *mrb, http_calls_t *calls)
{
    struct pollfd fds[HTTP_MAX_FDS];
    int i, n = own_sockets(calls, fds);

    for (i = 0; i < n; i++) {
        if (!mm_async_wait_io(mrb, fds[i].fd,
                              ((fds[i].events & POLLIN) ? MM_IO_IN : 0) |
                                  ((fds[i].events & POLLOUT) ? MM_IO_OUT : 0))) {
            return 0;
        }
    }
    return n >= 0;
}

static mrb_value http_step(mrb_state *mrb, mrb_value self)
{
    http_calls_t *calls = calls_of(mrb, mrb_get_arg1(mrb));
    struct pollfd fds[HTTP_MAX_FDS];
    long curl_ms = -1;
    int running, i, n;

    if (calls->multi == NULL || all_done(calls)) {
        return mrb_nil_value(); /* (ended while __start waited) */
    }
    n = own_sockets(calls, fds);
    if (n < 0) {
        curl_multi_socket_all(calls->multi, &running);
    } else {
        /* each of the calls' sockets (curl looks whether it is ready), and
         * with the first whatever timers are due */
        for (i = 0; i < n; i++) {
            curl_multi_socket_action(calls->multi, fds[i].fd, 0, &running);
        }
    }
    collect(calls->multi, calls->r, calls, mm_async_io_ready(mrb));
    if (all_done(calls)) {
        return mrb_nil_value();
    }
    if (watch_sockets(mrb, calls)) {
        calls->pause = HTTP_WATCHED_MAX;
    } else {
        calls->pause = calls->pause ? calls->pause * 2 : 1;
        if (calls->pause > HTTP_PAUSE_MAX) {
            calls->pause = HTTP_PAUSE_MAX;
        }
    }
    curl_multi_timeout(calls->multi, &curl_ms);
    return mrb_fixnum_value(
        next_look(calls, curl_ms >= 0 && curl_ms < (long)calls->pause ? curl_ms : (long)calls->pause));
}

static mrb_value http_finish(mrb_state *mrb, mrb_value self)
{
    mrb_value holder = mrb_get_arg1(mrb);

    detach(calls_of(mrb, holder));
    return results(mrb, holder);
}

void mm_http_init(mrb_state *mrb)
{
    struct RClass *http = mrb_define_module_under(mrb, mm_binding_apache(mrb), "HTTP");

    mrb_define_module_function(mrb, http, "__one", http_one, MRB_ARGS_REQ(3));
    mrb_define_module_function(mrb, http, "__spec", http_spec, MRB_ARGS_REQ(3));
    mrb_define_module_function(mrb, http, "__perform", http_perform, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, http, "__start", http_start, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, http, "__step", http_step, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, http, "__finish", http_finish, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, http, "__fields", http_fields, MRB_ARGS_REQ(1));
}
