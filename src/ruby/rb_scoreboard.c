/* rb_scoreboard.c: Apache::Scoreboard, the shared-memory table where every
 * worker of every child publishes its state: counts of workers by state,
 * idle and busy workers, accesses and traffic (these need ExtendedStatus,
 * which mod_status turns on), uptime and load. Read-only; an object holds
 * nothing, every method reads the scoreboard afresh. */

#include "httpd.h"
#include "ap_mpm.h"
#include "scoreboard.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/hash.h>
#include <mruby/string.h>

#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "classes.h"

static const char *const state_names[SERVER_NUM_STATUS] = {
#define MM_CONST(name) [name] = #name,
#include "scoreboard_constants.inc"
#undef MM_CONST
};

typedef struct {
    int counts[SERVER_NUM_STATUS];
    int busy;
    apr_uint64_t accesses, bytes;
    double cpu_ticks;
} mm_sb_totals_t;

/* Calls fn for every worker slot of the live scoreboard, with the pid of
 * its process (some MPMs set it in the worker slot, prefork only in the
 * process slot). */
static void each_worker(mrb_state *mrb, void (*fn)(mrb_state *, worker_score *, pid_t, void *), void *ctx)
{
    int servers = 0, threads = 0, i, j;

    if (!ap_exists_scoreboard_image()) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Scoreboard: there is no scoreboard in this process");
    }
    ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &servers);
    ap_mpm_query(AP_MPMQ_HARD_LIMIT_THREADS, &threads);
    for (i = 0; i < servers; i++) {
        pid_t pid = ap_get_scoreboard_process(i)->pid;

        for (j = 0; j < threads; j++) {
            worker_score *ws = ap_get_scoreboard_worker_from_indexes(i, j);

            fn(mrb, ws, ws->pid ? ws->pid : pid, ctx);
        }
    }
}

static void add_worker(mrb_state *mrb, worker_score *ws, pid_t pid, void *ctx)
{
    mm_sb_totals_t *t = ctx;
    int st = ws->status;

    if (st < SERVER_NUM_STATUS) {
        t->counts[st]++;
    }
    if (st != SERVER_READY && st != SERVER_DEAD && st != SERVER_STARTING && st != SERVER_IDLE_KILL) {
        t->busy++;
    }
    t->accesses += ws->access_count;
    t->bytes += (apr_uint64_t)ws->bytes_served;
#ifdef HAVE_TIMES
    t->cpu_ticks +=
        (double)ws->times.tms_utime + ws->times.tms_stime + ws->times.tms_cutime + ws->times.tms_cstime;
#endif
}

static void totals(mrb_state *mrb, mm_sb_totals_t *t)
{
    memset(t, 0, sizeof *t);
    each_worker(mrb, add_worker, t);
}

/* {"SERVER_READY" => n, "SERVER_BUSY_WRITE" => n, ...}: workers by state. */
static mrb_value sb_counter(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;
    mrb_value h = mrb_hash_new(mrb);
    int i;

    totals(mrb, &t);
    for (i = 0; i < SERVER_NUM_STATUS; i++) {
        if (state_names[i]) {
            mrb_hash_set(mrb, h, mrb_str_new_cstr(mrb, state_names[i]), mrb_fixnum_value(t.counts[i]));
        }
    }
    return h;
}

static mrb_value sb_idle_worker(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;

    totals(mrb, &t);
    return mrb_fixnum_value(t.counts[SERVER_READY]);
}

static mrb_value sb_busy_worker(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;

    totals(mrb, &t);
    return mrb_fixnum_value(t.busy);
}

static mrb_value sb_total_access(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;

    totals(mrb, &t);
    return mrb_fixnum_value((mrb_int)t.accesses);
}

static mrb_value sb_total_kbyte(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;

    totals(mrb, &t);
    return mrb_fixnum_value((mrb_int)(t.bytes / 1024));
}

static double uptime(mrb_state *mrb)
{
    if (!ap_exists_scoreboard_image()) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Scoreboard: there is no scoreboard in this process");
    }
    return (double)(apr_time_now() - ap_scoreboard_image->global->restart_time) / APR_USEC_PER_SEC;
}

/* Seconds since the last (re)start. */
static mrb_value sb_uptime(mrb_state *mrb, mrb_value self)
{
    return mrb_float_value(mrb, uptime(mrb));
}

static mrb_value sb_restart_time(mrb_state *mrb, mrb_value self)
{
    uptime(mrb); /* raises without a scoreboard */
    return mrb_float_value(mrb, (double)ap_scoreboard_image->global->restart_time / APR_USEC_PER_SEC);
}

/* CPU used by the workers, in percent of the time since the restart. */
static mrb_value sb_cpu_load(mrb_state *mrb, mrb_value self)
{
    mm_sb_totals_t t;
    double up = uptime(mrb), tick = (double)sysconf(_SC_CLK_TCK);

    totals(mrb, &t);
    return mrb_float_value(mrb, up > 0 && tick > 0 ? t.cpu_ticks / tick / up * 100.0 : 0.0);
}

static mrb_value sb_loadavg(mrb_state *mrb, mrb_value self)
{
    ap_loadavg_t la;
    mrb_value v[3];

    ap_get_loadavg(&la);
    v[0] = mrb_float_value(mrb, la.loadavg);
    v[1] = mrb_float_value(mrb, la.loadavg5);
    v[2] = mrb_float_value(mrb, la.loadavg15);
    return mrb_ary_new_from_values(mrb, 3, v);
}

static mrb_value sb_limit(mrb_state *mrb, mrb_value self, int query)
{
    int v = 0;

    ap_mpm_query(query, &v);
    return mrb_fixnum_value(v);
}

static mrb_value sb_server_limit(mrb_state *mrb, mrb_value self)
{
    return sb_limit(mrb, self, AP_MPMQ_HARD_LIMIT_DAEMONS);
}

static mrb_value sb_thread_limit(mrb_state *mrb, mrb_value self)
{
    return sb_limit(mrb, self, AP_MPMQ_HARD_LIMIT_THREADS);
}

static mrb_value sb_pid(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(getpid());
}

typedef struct {
    mrb_int pid;
    apr_uint64_t count;
} mm_sb_pid_t;

static void add_pid_accesses(mrb_state *mrb, worker_score *ws, pid_t pid, void *ctx)
{
    mm_sb_pid_t *p = ctx;

    if (pid == p->pid) {
        p->count += ws->access_count;
    }
}

/* Requests served by the workers of the child pid. */
static mrb_value sb_access_counter(mrb_state *mrb, mrb_value self)
{
    mm_sb_pid_t p = {0, 0};

    mrb_get_args(mrb, "i", &p.pid);
    each_worker(mrb, add_pid_accesses, &p);
    return mrb_fixnum_value((mrb_int)p.count);
}

typedef struct {
    mrb_value list; /* workers() */
    mrb_value map;  /* status() */
} mm_sb_workers_t;

static int is_active(int st)
{
    return st != SERVER_DEAD && st != SERVER_READY && st < SERVER_NUM_STATUS;
}

static void add_worker_info(mrb_state *mrb, worker_score *ws, pid_t pid, void *ctx)
{
    mm_sb_workers_t *w = ctx;
    int ai = mrb_gc_arena_save(mrb);
    mrb_value h, state;

    if (!is_active(ws->status)) {
        return;
    }
    state = mrb_str_new_cstr(mrb, state_names[ws->status]);
    /* The slots are written by their workers while we read: bounded copies. */
    if (mrb_hash_p(w->map)) {
        mrb_hash_set(mrb, w->map, mrb_str_new(mrb, ws->client64, strnlen(ws->client64, sizeof ws->client64)),
                     state);
    } else {
        h = mrb_hash_new(mrb);
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "pid"), mrb_fixnum_value(pid));
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "thread"), mrb_fixnum_value(ws->thread_num));
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "state"), state);
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "client"),
                     mrb_str_new(mrb, ws->client64, strnlen(ws->client64, sizeof ws->client64)));
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "request"),
                     mrb_str_new(mrb, ws->request, strnlen(ws->request, sizeof ws->request)));
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "vhost"),
                     mrb_str_new(mrb, ws->vhost, strnlen(ws->vhost, sizeof ws->vhost)));
        mrb_hash_set(mrb, h, mrb_str_new_lit(mrb, "access_count"),
                     mrb_fixnum_value((mrb_int)ws->access_count));
        mrb_ary_push(mrb, w->list, h);
    }
    mrb_gc_arena_restore(mrb, ai);
}

/* {client => state} for the workers in a request (mod_mruby's shape). */
static mrb_value sb_status(mrb_state *mrb, mrb_value self)
{
    mm_sb_workers_t w;

    w.map = mrb_hash_new(mrb);
    w.list = mrb_nil_value();
    each_worker(mrb, add_worker_info, &w);
    return w.map;
}

/* [{"pid"=>, "thread"=>, "state"=>, "client"=>, "request"=>, "vhost"=>,
 * "access_count"=>}, ...] for the workers that are not idle or dead. */
static mrb_value sb_workers(mrb_state *mrb, mrb_value self)
{
    mm_sb_workers_t w;

    w.map = mrb_nil_value();
    w.list = mrb_ary_new(mrb);
    each_worker(mrb, add_worker_info, &w);
    return w.list;
}

void mm_scoreboard_init(mrb_state *mrb)
{
    struct RClass *c = mrb_define_class_under(mrb, mm_binding_apache(mrb), "Scoreboard", mrb->object_class);

    mrb_define_method(mrb, c, "counter", sb_counter, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "status", sb_status, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "workers", sb_workers, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "idle_worker", sb_idle_worker, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "busy_worker", sb_busy_worker, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "total_access", sb_total_access, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "total_kbyte", sb_total_kbyte, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "uptime", sb_uptime, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "restart_time", sb_restart_time, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "cpu_load", sb_cpu_load, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "loadavg", sb_loadavg, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "server_limit", sb_server_limit, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "thread_limit", sb_thread_limit, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "pid", sb_pid, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "access_counter", sb_access_counter, MRB_ARGS_REQ(1));
#define MM_CONST(name) mrb_define_const(mrb, c, #name, mrb_fixnum_value(name));
#include "scoreboard_constants.inc"
#undef MM_CONST
}
