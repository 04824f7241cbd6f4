/* vm.c: one mruby VM per worker thread.
 *
 * A thread finds its VM through an APR thread key (pthread_getspecific: no
 * lock). The VM is created on the thread's first request (in a child with
 * threads, by the child's VM maker: see make_vm; a prefork child adopts
 * the one its parent made: see mm_vm_post_config) and closed by the
 * key's destructor when the thread exits; VMs of threads that never exit (the
 * prefork child's main thread) are closed when the child's pool goes. The
 * registry lock below is taken only when a VM is created or closed, never on
 * the request path. */

#include "apr_general.h"
#include "apr_allocator.h"
#include "apr_thread_mutex.h"

#include "apr_thread_proc.h"
#include "ap_mpm.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/error.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <malloc.h>
#include <string.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <unistd.h>

#include "binding.h"
#include "code.h"
#include "config.h"
#include "mod_mruby.h"
#include "error.h"
#include "guard.h"
#include "mruby_internal.h"
#include "thread.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

int mm_vm_async; /* see vm.h; set in child_init */

static apr_threadkey_t *vm_key;           /* child: the calling thread's mm_vm_t */
static apr_thread_mutex_t *registry_lock; /* child: guards registry */
static mm_vm_t *registry;                 /* child: the live VMs of this process */

static void registry_add(mm_vm_t *vm)
{
    apr_thread_mutex_lock(registry_lock);
    vm->next = registry;
    vm->prev = NULL;
    if (registry) {
        registry->prev = vm;
    }
    registry = vm;
    vm->registered = 1;
    vm->ctr = mm_counters_vm_open(vm->own_ctr);
    apr_thread_mutex_unlock(registry_lock);
}

/* Called under registry_lock. */
static void registry_remove(mm_vm_t *vm)
{
    if (vm->registered) {
        /* its counts stay in the block, for the next VM to go on from */
        vm->registered = 0;
        mm_counters_vm_close(vm->ctr);
        vm->ctr = vm->own_ctr;
    }
    if (vm->prev) {
        vm->prev->next = vm->next;
    } else if (registry == vm) {
        registry = vm->next;
    }
    if (vm->next) {
        vm->next->prev = vm->prev;
    }
    vm->next = vm->prev = NULL;
}

void mm_vm_each(void (*fn)(mm_vm_t *vm, void *ctx), void *ctx)
{
    mm_vm_t *vm;

    if (registry_lock == NULL) {
        return;
    }
    apr_thread_mutex_lock(registry_lock);
    for (vm = registry; vm; vm = vm->next) {
        fn(vm, ctx);
    }
    apr_thread_mutex_unlock(registry_lock);
}

/* mruby starts every VM's random generator from the same fixed seed: every
 * thread (and every VM that replaces one) would draw the same numbers. */
static void seed_random(mrb_state *mrb)
{
    apr_uint32_t seed;

    if (apr_generate_random_bytes((unsigned char *)&seed, sizeof seed) == APR_SUCCESS &&
        mrb_respond_to(mrb, mrb_top_self(mrb), mrb_intern_lit(mrb, "srand"))) {
        mrb_funcall(mrb, mrb_top_self(mrb), "srand", 1, mrb_int_value(mrb, (mrb_int)seed));
    }
}

/* mruby raises one SystemStackError object per VM, and one NoMemoryError,
 * to every script that overflows its stack or runs out of memory, and a
 * script that rescues one gets the object itself. Their messages are
 * frozen, as in Ruby: appended to by one script, they showed so in the log
 * entries of all the later ones. The NoMemoryError is frozen whole (it
 * never gets a backtrace); what a script can still change of the
 * SystemStackError, which needs one of its own each time, is put back
 * when the run ends (run.c), from what is kept here. */
static void keep_shared_errors(mrb_state *mrb, mm_vm_t *vm)
{
    mrb_value msg;

    vm->sym_mesg = mrb_intern_lit(mrb, "mesg");
    msg = mrb_obj_iv_get(mrb, mrb->nomem_err, vm->sym_mesg);
    if (mrb_string_p(msg)) {
        mrb_obj_freeze(mrb, msg);
    }
    mrb_obj_freeze(mrb, mrb_obj_value(mrb->nomem_err));
    vm->stack_error_class = mrb_obj_class(mrb, mrb_obj_value(mrb->stack_err));
    mrb_gc_register(mrb, mrb_obj_value(vm->stack_error_class));
    vm->stack_error_message = mrb_obj_iv_get(mrb, mrb->stack_err, vm->sym_mesg);
    if (mrb_string_p(vm->stack_error_message)) {
        mrb_obj_freeze(mrb, vm->stack_error_message);
    }
    mrb_gc_register(mrb, vm->stack_error_message);
}

/* Fiber.new of a block of 64 registers: see mm_mi_fiber_room. mruby's own
 * Fiber#initialize makes the fiber; this one then gives its stack the room
 * it lacks. */
static mrb_value fiber_initialize(mrb_state *mrb, mrb_value self)
{
    mrb_value fiber = mm_vm_of(mrb)->fiber_initialize(mrb, self);

    mm_mi_fiber_room(mrb, self);
    return fiber;
}

/* Wraps mruby's Fiber#initialize (a C method) in fiber_initialize. */
static void wrap_fiber_initialize(mrb_state *mrb, mm_vm_t *vm)
{
    struct RClass *c = vm->fiber_class;
    mrb_method_t m = mrb_method_search_vm(mrb, &c, vm->sym_initialize);

    if (!MRB_METHOD_UNDEF_P(m) && MRB_METHOD_CFUNC_P(m)) {
        vm->fiber_initialize = MRB_METHOD_CFUNC(m);
        mrb_define_method_id(mrb, vm->fiber_class, vm->sym_initialize, fiber_initialize, MRB_ARGS_BLOCK());
    }
}

static void count_io_objects(mrb_state *mrb);

static mrb_value init_body(mrb_state *mrb, void *unused)
{
    mrb_value pending;

    mm_guard_init(mrb);
    count_io_objects(mrb);
    mm_binding_init(mrb);
    pending = mm_mi_take_pending(mrb);
    if (!mrb_nil_p(pending)) {
        mrb_exc_raise(mrb, pending);
    }
    seed_random(mrb);
    /* Found through the constant, the class would be what a script made
     * of it: the harness asks for it after the script ended, where a
     * raise (the constant removed, or not a class any more) has nowhere to
     * go, and mruby aborts the process. Kept from the GC, should the
     * constant go. */
    mm_vm_of(mrb)->http_error = mrb_class_get_under(mrb, mm_binding_apache(mrb), "HTTPError");
    mrb_gc_register(mrb, mrb_obj_value(mm_vm_of(mrb)->http_error));
    /* The same for what mrubyTimeout raises: looked up while the script
     * runs, a NameError in its place would be rescued by a plain rescue,
     * and before the hard stop, so a script could run for ever. */
    mm_vm_of(mrb)->timeout_class = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Timeout");
    mrb_gc_register(mrb, mrb_obj_value(mm_vm_of(mrb)->timeout_class));
    /* And the class of the fibers scripts that may sleep run in: a script
     * that removed the constant left the class to the collector, and the
     * next fiber was made of a freed object. */
    mm_vm_of(mrb)->fiber_class = mrb_class_get(mrb, "Fiber");
    mrb_gc_register(mrb, mrb_obj_value(mm_vm_of(mrb)->fiber_class));
    mm_vm_of(mrb)->sym_initialize = mrb_intern_lit(mrb, "initialize");
    wrap_fiber_initialize(mrb, mm_vm_of(mrb));
    mm_vm_of(mrb)->sym_backtrace = mrb_intern_lit(mrb, "backtrace");
    keep_shared_errors(mrb, mm_vm_of(mrb));
    mm_mi_gc_settings(mrb, &mm_vm_of(mrb)->gc);

    return mrb_nil_value();
}

/* The free memory a VM's pool keeps for reuse; more goes back to the
 * system. */
#define MM_VM_POOL_KEEP (512 * 1024)

apr_pool_t *mm_vm_pool(mm_vm_t *vm)
{
    if (vm->pool == NULL && apr_pool_create_unmanaged_ex(&vm->pool, NULL, NULL) == APR_SUCCESS) {
        apr_pool_tag(vm->pool, "mod_mruby_vm");
        /* Scratch pools of the VM's operations (Apache::Cache reads reserve
         * the cache's max-value, up to 64 MB) give their memory back to
         * this allocator, which keeps only so much of it for the next
         * ones. */
        apr_allocator_max_free_set(apr_pool_allocator_get(vm->pool), MM_VM_POOL_KEEP);
    }
    return vm->pool;
}

apr_pool_t *mm_vm_pool_or_raise(mrb_state *mrb, const char *what)
{
    apr_pool_t *pool = mm_vm_pool(mm_vm_of(mrb));

    if (pool == NULL) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s: out of memory", what);
    }
    return pool;
}

/* The VM's recursive lock (event MPM); 0 if it cannot be made. */
static int make_lock(mm_vm_t *vm)
{
    pthread_mutexattr_t attr;

    if (pthread_mutexattr_init(&attr) != 0) {
        return 0;
    }
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    vm->locking = pthread_mutex_init(&vm->lock, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
    return vm->locking;
}

/* What mm_vm_create made, in the reverse order: the pool last, whose
 * cleanups (a Regexp's match data, Apache::HTTP's handle) outlive mrb. */
static void vm_free(mm_vm_t *vm)
{
    if (vm->mrb) {
        mrb_close(vm->mrb);
    }
    if (vm->pool) {
        apr_pool_destroy(vm->pool);
    }
    if (vm->locking) {
        pthread_mutex_destroy(&vm->lock);
    }
    mm_code_files_free(vm);
    free(vm->loaded);
    free(vm);
}

/* mruby's collector counts objects, not bytes: a script that makes a few
 * big Strings a request leaves megabytes of garbage for each object the
 * collector sees, and a VM grew to hundreds of MB before a collection.
 * Blocks of at least MM_GC_BIG_BLOCK bytes are added up; past
 * MM_GC_BIG_BYTES, the next safe point (mm_vm_collect_big_garbage) runs a
 * full collection. Every block also counts towards the minor collection
 * at a run's end (young_bytes: mm_vm_collect_young_garbage). */
#define MM_GC_BIG_BLOCK 1024
#define MM_GC_BIG_BYTES (4 * 1024 * 1024)

static void count_bytes(mm_vm_t *vm, size_t size)
{
    vm->young_bytes += size;
    if (size >= MM_GC_BIG_BLOCK) {
        vm->big_bytes += size;
    }
}

/* Without mrubyMemoryLimit: mruby's default allocator, counting big
 * blocks. */
static void *counting_allocf(mrb_state *mrb, void *p, size_t size, void *ud)
{
    (void)mrb;
    if (size == 0) {
        free(p);
        return NULL;
    }
    count_bytes(ud, size);
    return realloc(p, size);
}

/* mrubyMemoryLimit: mruby's allocations for one VM, counted with the
 * allocator's own idea of block sizes (no header per block). Refusing an
 * allocation makes mruby collect garbage and try again, then raise
 * NoMemoryError. */
static void *limited_allocf(mrb_state *mrb, void *p, size_t size, void *ud)
{
    mm_vm_t *vm = ud;
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q;

    (void)mrb;
    if (size == 0) {
        vm->mem_used -= old;
        free(p);
        return NULL;
    }
    if (size > old && vm->mem_used - old + size > vm->mem_limit) {
        vm->exhausted = 1;
        return NULL;
    }
    q = realloc(p, size);
    if (q) {
        vm->mem_used = vm->mem_used - old + malloc_usable_size(q);
        count_bytes(vm, size);
    }
    return q;
}

/* The method tables that the VMs of a child share (mm_mi_share_class_tables):
 * every VM's set-up defines the same methods in the same order, so that
 * most of its classes' tables hold the same bytes in every VM (benchmarks.md,
 * "Method tables shared between a child's VMs"). Each is kept once, for the
 * child's life, found by its bytes; a VM that writes to one takes a copy
 * first. Only where a child has threads: a prefork child's one VM would
 * only move its tables here. */
#define MM_SHARED_TABLES_MAX     (1024 * 1024) /* bytes a child keeps at most */
#define MM_SHARED_TABLES_BUCKETS 256

typedef struct shared_table {
    struct shared_table *next;
    size_t bytes;
    apr_uint32_t hash;
    /* the bytes follow */
} shared_table_t;

static shared_table_t *shared_tables[MM_SHARED_TABLES_BUCKETS]; /* child, under registry_lock */
static size_t shared_tables_bytes;
static int shared_tables_on; /* child: it has threads */

static const void *share_table(const void *slots, size_t bytes, void *unused)
{
    const unsigned char *b = slots;
    apr_uint32_t hash = 2166136261u;
    shared_table_t *t;
    const void *found = NULL;
    size_t i;

    (void)unused;
    if (!shared_tables_on || registry_lock == NULL) {
        return NULL;
    }
    for (i = 0; i < bytes; i++) {
        hash = (hash ^ b[i]) * 16777619u;
    }
    apr_thread_mutex_lock(registry_lock);
    for (t = shared_tables[hash % MM_SHARED_TABLES_BUCKETS]; t; t = t->next) {
        if (t->hash == hash && t->bytes == bytes && memcmp(t + 1, slots, bytes) == 0) {
            found = t + 1;
            break;
        }
    }
    if (found == NULL && shared_tables_bytes + bytes <= MM_SHARED_TABLES_MAX &&
        (t = malloc(sizeof *t + bytes)) != NULL) {
        t->bytes = bytes;
        t->hash = hash;
        memcpy(t + 1, slots, bytes);
        t->next = shared_tables[hash % MM_SHARED_TABLES_BUCKETS];
        shared_tables[hash % MM_SHARED_TABLES_BUCKETS] = t;
        shared_tables_bytes += bytes;
        found = t + 1;
    }
    apr_thread_mutex_unlock(registry_lock);
    return found;
}

static void full_gc(mm_vm_t *vm)
{
    vm->big_bytes = 0;
    vm->young_bytes = 0;
    vm->io_made = 0;
    mrb_full_gc(vm->mrb);
}

/* What a run that handled a lot of data freed stayed in the child's
 * resident memory: 43 MB after a run that split a 20 MB body into its
 * fields. mruby frees a page of its objects only in the collection after
 * the one that found them all dead, and glibc gives memory back to the
 * system only from the top of a heap. So a collection that follows
 * MM_TRIM_BYTES of big blocks since the last one (a run that handled that
 * much) is followed by a second one, which frees the emptied pages, and by
 * malloc_trim, which gives back every free page of every heap: a few ms
 * at most, only after such runs. */
#define MM_TRIM_BYTES (32 * 1024 * 1024)

void mm_vm_collect_big_garbage(mm_vm_t *vm)
{
    if (vm->big_bytes > MM_GC_BIG_BYTES) {
        int trim = vm->big_bytes >= MM_TRIM_BYTES;

        full_gc(vm);
        if (trim) {
            mrb_full_gc(vm->mrb);
            malloc_trim(0);
        }
    }
}

/* What a run leaves for the collector, for mruby to find when the objects
 * it counts since its last collection pass a threshold (twice those it
 * kept): a VM keeps some 600 objects, so a handler that makes 80 a request
 * left the garbage of some 8 requests in every worker (62 KB of the
 * bench's realistic handler: its bodies, its line Strings, their pages),
 * and a collection that ran in the middle of a run kept that run's
 * objects, old from then on. So once MM_GC_YOUNG_BYTES were allocated
 * since the last collection run here, the end of an outermost run, where
 * none of its objects is left alive (mm_mi_close_root_frame clears the
 * registers it ran in), runs a minor collection: on that handler 2 % fewer
 * instructions (no major collection any more) and 45 KiB less memory per
 * VM (benchmarks.md, "A collection at a run's end"). */
#define MM_GC_YOUNG_BYTES (16 * 1024)

void mm_vm_collect_young_garbage(mm_vm_t *vm, server_rec *s)
{
    if (vm->young_bytes >= MM_GC_YOUNG_BYTES) {
        apr_size_t allocated = vm->young_bytes;
        size_t live;

        vm->young_bytes = 0;
        if (mm_mi_gc_minor(vm->mrb, &live)) {
            ap_log_error(APLOG_MARK, APLOG_TRACE1, 0, s,
                         MM_LOGNO(00019) "collected the VM's garbage after a run: %" APR_SIZE_T_FMT
                                         " bytes allocated since the last such collection, %" APR_SIZE_T_FMT
                                         " objects live",
                         allocated, (apr_size_t)live);
        }
    }
}

/* mruby-io's IO objects (File, the sockets) close their descriptor only
 * when the collector frees them, and the collector counts objects: a
 * script that opened a File a request and dropped it without #close left
 * a worker or event child with 990 open descriptors after 3,000 requests,
 * and EMFILE under a limit of 1,024. So each VM counts the IO objects it
 * makes: once MM_GC_IO_MADE were made since its last full collection, one
 * runs before the next is made.
 * The kernel gives the lowest free descriptor number: one past half the
 * process's limit means that many are open in the process, whichever VM
 * holds them, and then the VM collects before each IO object it makes. A
 * collection frees only what nothing refers to: a File the script holds
 * stays open. Descriptors that no object holds (IO.sysopen's numbers) are
 * the script's to close. */
#define MM_GC_IO_MADE 16

static mrb_int fd_crowded = MRB_INT_MAX; /* child: half its RLIMIT_NOFILE */

void mm_vm_before_io(mrb_state *mrb)
{
    mm_vm_t *vm = mm_vm_of(mrb);

    if (vm->io_made >= MM_GC_IO_MADE) {
        full_gc(vm);
    }
}

void mm_vm_after_io(mrb_state *mrb, int made, mrb_int fd)
{
    mm_vm_t *vm = mm_vm_of(mrb);

    vm->io_made = fd >= fd_crowded ? MM_GC_IO_MADE : vm->io_made + made;
}

/* The descriptor of IO.new(fd, ...), IO.for_fd(fd, ...), of the
 * descriptor File#initialize opened: the first argument. */
static mrb_int fd_argument(mrb_state *mrb)
{
    const mrb_value *argv = mrb_get_argv(mrb);

    return mrb_get_argc(mrb) > 0 && mrb_integer_p(argv[0]) ? mrb_integer(argv[0]) : 0;
}

/* mruby's functions of the methods wrapped (guard.h) */
static mrb_func_t own_io_initialize, own_io_for_fd, own_io_popen, own_io_pipe;

static mrb_value io_made(mrb_state *mrb, mrb_value self, mrb_func_t *own)
{
    mrb_int fd = fd_argument(mrb);
    mrb_value io;

    mm_vm_before_io(mrb);
    io = mm_guard_original(own)(mrb, self);
    mm_vm_after_io(mrb, 1, fd);
    return io;
}

static mrb_value io_initialize(mrb_state *mrb, mrb_value self)
{
    return io_made(mrb, self, &own_io_initialize);
}

static mrb_value io_for_fd(mrb_state *mrb, mrb_value self)
{
    return io_made(mrb, self, &own_io_for_fd);
}

static mrb_value io_popen(mrb_state *mrb, mrb_value self)
{
    return io_made(mrb, self, &own_io_popen);
}

static mrb_value io_pipe(mrb_state *mrb, mrb_value self)
{
    mrb_value pair;

    mm_vm_before_io(mrb);
    pair = mm_guard_original(&own_io_pipe)(mrb, self);
    mm_vm_after_io(mrb, 2, 0);
    return pair;
}

static void count_io_objects(mrb_state *mrb)
{
    struct RClass *io = mrb_class_defined(mrb, "IO") ? mrb_class_get(mrb, "IO") : NULL;
    struct RClass *meta;

    if (io == NULL) {
        return;
    }
    meta = mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(io)));
    mm_guard_wrap(mrb, io, "initialize", io_initialize, &own_io_initialize);
    mm_guard_wrap(mrb, meta, "for_fd", io_for_fd, &own_io_for_fd);
    mm_guard_wrap(mrb, meta, "popen", io_popen, &own_io_popen);
    mm_guard_wrap(mrb, meta, "pipe", io_pipe, &own_io_pipe);
}

mrb_value mm_vm_data_string(mrb_state *mrb, mrb_int len)
{
    mm_vm_collect_big_garbage(mm_vm_of(mrb));
    return mrb_str_new(mrb, NULL, len);
}

mm_vm_t *mm_vm_create(server_rec *s)
{
    mm_vm_t *vm = calloc(1, sizeof *vm);
    mrb_state *mrb;
    mrb_bool raised = FALSE;
    mrb_value exc;
    int ai;

    if (vm != NULL) {
        vm->nloaded = mm_code_script_count();
        vm->loaded = calloc(vm->nloaded + 1, sizeof(mm_loaded_t));
    }
    if (vm == NULL || vm->loaded == NULL) {
        free(vm);
        ap_log_error(APLOG_MARK, APLOG_CRIT, 0, s,
                     MM_LOGNO(00011) "cannot create an mruby VM: out of memory");
        return NULL;
    }
    vm->ctr = vm->own_ctr;
    vm->mem_limit = mm_settings.memory_limit;
    mrb = mrb_open_allocf(vm->mem_limit ? limited_allocf : counting_allocf, vm);
    if (mrb == NULL) {
        vm_free(vm);
        ap_log_error(
            APLOG_MARK, APLOG_CRIT, 0, s,
            MM_LOGNO(00010) "cannot create an mruby VM: out of memory (is mrubyMemoryLimit too low?)");
        return NULL;
    }
    vm->mrb = mrb;
    if (mm_vm_async && !make_lock(vm)) {
        vm_free(vm);
        ap_log_error(APLOG_MARK, APLOG_CRIT, 0, s, MM_LOGNO(00015) "cannot create an mruby VM's lock");
        return NULL;
    }
    mrb->ud = vm;

    ai = mrb_gc_arena_save(mrb);
    exc = mrb_protect_error(mrb, init_body, NULL, &raised);
    if (raised) {
        mm_error_log_exception(vm, exc, NULL, s, APLOG_ERR, "VM setup", "mod_mruby");
        mrb_gc_arena_restore(mrb, ai);
        mm_vm_close(vm);
        return NULL;
    }
    mrb_gc_arena_restore(mrb, ai);
    /* The VM starts from a collected heap: the collector's next threshold
     * is then reckoned from what the VM holds, not from the garbage of its
     * set-up, and the pages that held only garbage are freed (by the second
     * collection: see MM_TRIM_BYTES). The realistic handler's memory per VM
     * went from 696 to 457 KiB with it, and its instructions per request
     * did not grow (benchmarks.md, "A collected heap at the start"). */
    mrb_full_gc(mrb);
    /* Its classes are all defined: their tables give back the slots they
     * grew by and do not use, each in one block with its header, about
     * 23 KB (benchmarks.md, "Class tables shrunk to what they hold").
     * Scripts that define methods or constants later grow them again. */
    mm_mi_compact_class_tables(mrb);
    /* Then the tables that hold the same bytes in every VM are shared with
     * the child's other VMs (share_table). The Procs that the set-up made
     * of its methods (those it called, aliases, attr_reader's) are made
     * lazy again first, and left to these two collections, the second of
     * which frees the pages they emptied. */
    mm_mi_share_class_tables(mrb, share_table, NULL);
    mrb_full_gc(mrb);
    mrb_full_gc(mrb);
    vm->young_bytes = 0;
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s, MM_LOGNO(00012) "created an mruby VM for pid %" APR_PID_T_FMT,
                 getpid());
    return vm;
}

void mm_vm_close(mm_vm_t *vm)
{
    if (registry_lock) {
        apr_thread_mutex_lock(registry_lock);
        registry_remove(vm);
        apr_thread_mutex_unlock(registry_lock);
    }
    vm_free(vm);
}

void mm_vm_ran(mm_vm_t *vm, server_rec *s)
{
    vm->runs++;
    mm_ctr_add(vm->ctr, MM_CTR_RUNS, 1);
    if (vm->retire) {
        return;
    }
    if (vm->exhausted) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     MM_LOGNO(00016) "an mruby VM reached mrubyMemoryLimit (%" APR_SIZE_T_FMT
                                     " bytes): replacing it",
                     vm->mem_limit);
        vm->retire = MM_RETIRE_MEMORY;
    } else if (mm_settings.max_requests && vm->runs >= mm_settings.max_requests) {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                     MM_LOGNO(00017) "an mruby VM served %" APR_UINT64_T_FMT " runs: replacing it", vm->runs);
        vm->retire = MM_RETIRE_RUNS;
    }
}

/* Replaces the calling thread's VM, marked for retirement, unless a run is
 * in progress in it (nested, or resumed by another thread). Returns whether
 * it did. */
static int retire(mm_vm_t *vm)
{
    int busy, sleeping;

    mm_vm_lock(vm);
    busy = vm->run != NULL;
    sleeping = vm->suspended > 0;
    vm->orphaned = !busy && sleeping;
    mm_vm_unlock(vm);
    if (busy) {
        return 0;
    }
    apr_threadkey_private_set(NULL, vm_key);
    if (!sleeping) {
        mm_vm_close(vm); /* else the run that ends the last sleeper closes it */
    }
    return 1;
}

mm_vm_t *mm_vm_of_thread(void)
{
    void *found = NULL;

    if (vm_key) {
        apr_threadkey_private_get(&found, vm_key);
    }
    return found;
}

/* The VM maker: in a child with threads, one thread of the module's own
 * makes every worker thread's VM, and the worker waits for it. A VM's
 * set-up frees hundreds of blocks (tables grown, then compacted or shared;
 * the Procs and pages of its garbage), and glibc keeps the small ones in a
 * cache of the thread that freed them, for that thread's next blocks of
 * the same sizes: about 30 KB a thread, which a worker serving hello world
 * never takes back, and which no other thread can use. Made in one thread,
 * the VMs reuse the one cache, each set-up the garbage of the last
 * (benchmarks.md, "The VMs made by one thread"). The thread's name, as
 * ps -L and top -H show it: */
#define MM_MAKER_NAME "mruby-vms"

typedef struct vm_order {
    server_rec *s;
    mm_vm_t *vm;
    int done;
    struct vm_order *next;
} vm_order_t;

static struct {
    int on;              /* set in child_init, before any worker thread */
    mm_thread_t t;       /* t.lock guards what follows */
    pthread_cond_t made; /* broadcast when an order is done */
    vm_order_t *first, **last;
} maker;

static void *maker_main(void *unused)
{
    vm_order_t *order;

    (void)unused;
    pthread_setname_np(pthread_self(), MM_MAKER_NAME);
    pthread_mutex_lock(&maker.t.lock);
    for (;;) {
        while (maker.first == NULL && !maker.t.stop) {
            mm_thread_wait_until(&maker.t, MM_NEVER);
        }
        if ((order = maker.first) == NULL) {
            break; /* stopped, and nobody waits */
        }
        if ((maker.first = order->next) == NULL) {
            maker.last = &maker.first;
        }
        pthread_mutex_unlock(&maker.t.lock);
        order->vm = mm_vm_create(order->s);
        pthread_mutex_lock(&maker.t.lock);
        order->done = 1;
        pthread_cond_broadcast(&maker.made);
    }
    pthread_mutex_unlock(&maker.t.lock);
    return NULL;
}

/* A VM for the calling thread, made by the maker if it runs, else here. */
static mm_vm_t *make_vm(server_rec *s)
{
    vm_order_t order = {s, NULL, 0, NULL};

    if (!maker.on) {
        return mm_vm_create(s);
    }
    pthread_mutex_lock(&maker.t.lock);
    if (maker.t.stop) { /* the child is exiting */
        pthread_mutex_unlock(&maker.t.lock);
        return mm_vm_create(s);
    }
    *maker.last = &order;
    maker.last = &order.next;
    pthread_cond_signal(&maker.t.cond);
    while (!order.done) {
        pthread_cond_wait(&maker.made, &maker.t.lock);
    }
    pthread_mutex_unlock(&maker.t.lock);
    return order.vm;
}

static apr_status_t maker_stop(void *unused)
{
    (void)unused;
    mm_thread_stop(&maker.t);
    return APR_SUCCESS;
}

static void maker_start(apr_pool_t *pchild, server_rec *s)
{
    int rv;

    maker.on = 0;
    maker.first = NULL;
    maker.last = &maker.first;
    pthread_cond_init(&maker.made, NULL);
    if ((rv = mm_thread_start(&maker.t, maker_main, 0)) != 0) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                     MM_LOGNO(00018) "cannot start the thread that makes the mruby VMs: each thread makes "
                                     "its own");
        return;
    }
    maker.on = 1;
    apr_pool_cleanup_register(pchild, NULL, maker_stop, apr_pool_cleanup_null);
}

mm_vm_t *mm_vm_for_thread(server_rec *s)
{
    void *found = NULL;
    mm_vm_t *vm;

    if (vm_key == NULL) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, MM_LOGNO(00013) "no mruby VM outside a child process");
        return NULL;
    }
    apr_threadkey_private_get(&found, vm_key);
    if (found && !(((mm_vm_t *)found)->retire && retire(found))) {
        return found;
    }
    vm = make_vm(s);
    if (vm) {
        apr_threadkey_private_set(vm, vm_key);
        registry_add(vm);
    }
    return vm;
}

/* The thread key's destructor: the thread is exiting. A VM whose scripts
 * still sleep is left to the run that finishes the last of them. */
static void vm_thread_exit(void *data)
{
    mm_vm_t *vm = data;
    int busy;

    mm_vm_lock(vm);
    busy = vm->suspended > 0;
    vm->orphaned = busy;
    mm_vm_unlock(vm);
    if (!busy) {
        mm_vm_close(vm);
    }
}

mm_vm_t *mm_vm_enter(mm_vm_t *vm)
{
    void *previous = NULL;

    apr_threadkey_private_get(&previous, vm_key);
    apr_threadkey_private_set(vm, vm_key);
    mm_vm_lock(vm);
    return previous;
}

void mm_vm_leave(mm_vm_t *vm, mm_vm_t *previous)
{
    int close = vm->orphaned && vm->suspended == 0;

    mm_vm_unlock(vm);
    apr_threadkey_private_set(previous, vm_key);
    if (close) {
        mm_vm_close(vm);
    }
}

/* Prefork: the VM a child's one thread runs its scripts in is made once, in
 * the parent, after the configuration is read, and each child adopts its
 * copy at its start. The copies share the parent's pages until a child
 * writes to them (a heap page whose free slots it fills, the VM's stack and
 * method cache); the class and method tables, the symbols and the objects
 * the set-up left, which scripts read and seldom change, stay shared: the
 * realistic handler's memory per child went from 395 to 175 KiB
 * (benchmarks.md, "The prefork child's VM made in the parent"). A VM that
 * replaces it (mrubyMaxRequestsPerVM, mrubyMemoryLimit) is made in the
 * child, as before. The parent makes it anew at each restart. Not for the
 * threads of worker and event: a VM in the parent for each thread of a
 * child cost the parent more than the children saved, below some six
 * children (benchmarks.md, the same section). */
static mm_vm_t *parent_made; /* the parent's, until a child adopts it */

static apr_status_t close_parent_made(void *unused)
{
    (void)unused;
    if (parent_made) {
        mm_vm_close(parent_made);
        parent_made = NULL;
    }
    return APR_SUCCESS;
}

void mm_vm_post_config(apr_pool_t *pconf, server_rec *s)
{
    int threaded = 0;

    if (ap_mpm_query(AP_MPMQ_IS_THREADED, &threaded) != APR_SUCCESS || threaded != AP_MPMQ_NOT_SUPPORTED) {
        return; /* the child's maker makes its threads' VMs */
    }
    if ((parent_made = mm_vm_create(s)) != NULL) {
        apr_pool_cleanup_register(pconf, NULL, close_parent_made, apr_pool_cleanup_null);
    }
}

static mrb_value reseed_body(mrb_state *mrb, void *unused)
{
    (void)unused;
    seed_random(mrb);
    return mrb_nil_value();
}

/* The child's main thread takes the parent's VM as its own. */
static void adopt_parent_made(server_rec *s)
{
    mm_vm_t *vm = parent_made;
    mrb_bool raised = FALSE;
    mrb_value exc;
    int ai;

    parent_made = NULL; /* the child's now (one process: pconf's cleanup leaves it alone) */
    /* Every child's copy would draw the parent's numbers. */
    ai = mrb_gc_arena_save(vm->mrb);
    exc = mrb_protect_error(vm->mrb, reseed_body, NULL, &raised);
    if (raised) {
        mm_error_log_exception(vm, exc, NULL, s, APLOG_ERR, "VM setup", "mod_mruby");
        mrb_gc_arena_restore(vm->mrb, ai);
        mm_vm_close(vm); /* the child's first run makes one of its own */
        return;
    }
    mrb_gc_arena_restore(vm->mrb, ai);
    apr_threadkey_private_set(vm, vm_key);
    registry_add(vm);
}

/* The child is exiting. Its worker threads have ended (their VMs are closed
 * already) except where exit interrupts one, e.g. a signal during a request:
 * a VM in use is left alone, the process is going away. */
static apr_status_t child_exit(void *unused)
{
    mm_vm_t *vm, *next;

    apr_thread_mutex_lock(registry_lock);
    for (vm = registry; vm; vm = next) {
        next = vm->next;
        if (vm->run == NULL && vm->suspended == 0) {
            registry_remove(vm);
            vm_free(vm);
        }
    }
    apr_thread_mutex_unlock(registry_lock);
    registry_lock = NULL;
    vm_key = NULL;
    return APR_SUCCESS;
}

void mm_vm_child_init(apr_pool_t *pchild, server_rec *s)
{
    apr_status_t rv;
    struct rlimit nofile;

    registry = NULL;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
        nofile.rlim_cur / 2 < (rlim_t)MRB_INT_MAX) {
        fd_crowded = (mrb_int)(nofile.rlim_cur / 2);
    }
    if (ap_mpm_query(AP_MPMQ_IS_ASYNC, &mm_vm_async) != APR_SUCCESS) {
        mm_vm_async = 0;
    }
    if (ap_mpm_query(AP_MPMQ_IS_THREADED, &shared_tables_on) != APR_SUCCESS) {
        shared_tables_on = AP_MPMQ_NOT_SUPPORTED;
    }
    shared_tables_on = shared_tables_on != AP_MPMQ_NOT_SUPPORTED;
    rv = apr_thread_mutex_create(&registry_lock, APR_THREAD_MUTEX_DEFAULT, pchild);
    if (rv == APR_SUCCESS) {
        rv = apr_threadkey_private_create(&vm_key, vm_thread_exit, pchild);
    }
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s, MM_LOGNO(00014) "cannot set up per-thread mruby VMs");
        vm_key = NULL;
        return;
    }
    /* Registered after the key, so it runs before the key is deleted. */
    apr_pool_cleanup_register(pchild, NULL, child_exit, apr_pool_cleanup_null);
    if (shared_tables_on) {
        maker_start(pchild, s); /* stopped before child_exit runs */
    } else if (parent_made) {
        adopt_parent_made(s);
    }
}
