/* code.h: Ruby code as configured (inline or in files), compiled once and
 * loaded into each thread's VM. */
#ifndef MM_CODE_H
#define MM_CODE_H

#include "apr_file_info.h"
#include "httpd.h"
#include "http_config.h"
#include "vm.h"

/* One configured script. Lives in pconf and is read-only after configuration,
 * so every thread may read it without a lock. */
typedef struct {
    int id;             /* slot in every VM's loaded[] */
    const char *name;   /* for logs: the file, or "<config file>:<line>" */
    const char *path;   /* the file of a file script; NULL for inline code */
    int reload;         /* file script without `cache`: reloaded when it changes */
    const uint8_t *bin; /* RITE image compiled while reading the config; NULL if reload */
    apr_size_t bin_len;
} mm_script_t;

/* What identifies one version of a script file. */
typedef struct {
    apr_ino_t inode;
    apr_dev_t device;
    apr_off_t size;
    apr_time_t mtime;
    apr_time_t ctime;
} mm_stamp_t;

/* A script loaded into one VM; owned by the VM (its pool). */
typedef struct mm_loaded {
    struct RProc *proc;  /* kept alive with mrb_gc_register while loaded */
    struct RProc *block; /* the same code as a fiber's block (mm_code_fiber_block), or NULL */

    int may_suspend;  /* refers to Apache::Async, or once slept: run it in a fiber */
    mm_stamp_t stamp; /* file scripts: the version proc was built from */
} mm_loaded_t;

/* Frees the VM's table of file scripts (when the VM is closed). */
void mm_code_files_free(mm_vm_t *vm);

/* The loaded script as a block for a fiber (made once per VM and version). */
struct RProc *mm_code_fiber_block(mm_vm_t *vm, mm_loaded_t *l);

/* Configuration time. Both compile the code now, so `apachectl -t` reports
 * syntax errors; they return NULL or an error message for the directive. */
const char *mm_code_inline(cmd_parms *cmd, const char *code, const mm_script_t **out);
const char *mm_code_file(cmd_parms *cmd, const char *path, int cache, const mm_script_t **out);

/* Number of scripts configured in this generation (sizes each VM's loaded[]). */
int mm_code_script_count(void);

/* Bounds what scripts give eval, instance_eval, class_eval and module_eval
 * by mrubyCompileLimit, as the scripts themselves are (a VM's init). */
void mm_code_guard_eval(mrb_state *mrb);

void mm_code_pre_config(apr_pool_t *pconf);
void mm_code_post_config(void);

/* Request time, in the calling thread's VM. On failure they return NULL and
 * set *err (allocated from p) to a message with the file and line. s is
 * where a file compiled now logs its warning. */
mm_loaded_t *mm_code_script_proc(mm_vm_t *vm, server_rec *s, const mm_script_t *script, apr_pool_t *p,
                                 const char **err);
mm_loaded_t *mm_code_file_proc(mm_vm_t *vm, server_rec *s, const char *path, const apr_finfo_t *finfo,
                               apr_pool_t *p, const char **err);

#endif
