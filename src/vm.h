/* vm.h: the per-thread mruby VM. Each worker thread owns one mrb_state,
 * created on the thread's first request and closed when the thread (or, for
 * the main thread under prefork, the child process) ends. Nothing on the
 * request path takes a lock to reach it. */
#ifndef MM_VM_H
#define MM_VM_H

#include "apr_hash.h"
#include "apr_pools.h"
#include "httpd.h"

#include <mruby.h>

struct mm_run;

typedef struct mm_vm mm_vm_t;

/* Owned by the thread that created it; freed by mm_vm_close. mrb->ud points
 * back to this struct, which is how C methods find the current run. */
struct mm_vm {
    mrb_state *mrb;
    apr_pool_t *pool;     /* this VM's own pool (private allocator): file table */
    struct RProc **procs; /* scripts compiled at config time, by id; loaded lazily */
    int nprocs;
    apr_hash_t *files;    /* path -> loaded file script (see code.c) */
    struct mm_run *run;   /* innermost run in progress, NULL between runs */
    uintptr_t serial;     /* counts runs; wrapper objects remember theirs */
    mm_vm_t *next, *prev; /* the child's list of live VMs */
};

/* The calling thread's VM, created on first use; NULL (and logged) when it
 * cannot be created. */
mm_vm_t *mm_vm_for_thread(server_rec *s);

/* A VM for the parent process (configuration phases); closed with pool. */
mm_vm_t *mm_vm_create(server_rec *s);
void mm_vm_close(mm_vm_t *vm);

/* child_init: creates the thread key and the registry of live VMs. */
void mm_vm_child_init(apr_pool_t *pchild, server_rec *s);

static inline mm_vm_t *mm_vm_of(mrb_state *mrb)
{
    return (mm_vm_t *)mrb->ud;
}

#endif
