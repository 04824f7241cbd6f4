/* config.h: per-section and per-server configuration, and the directives
 * that fill it. */
#ifndef MM_CONFIG_H
#define MM_CONFIG_H

#include "apr_tables.h"
#include "httpd.h"
#include "http_config.h"

#include "code.h"
#include "phase.h"
#include "slots.h"

/* Per-section configuration (<Location>, <Directory>, <Files>, <If>, the
 * server's own defaults). Lives in pconf; read-only once configuration has
 * been read. A NULL phase entry means "not configured here": the section
 * inherits its parent's scripts for that phase. */
typedef struct {
    /* scripts[phase] is NULL or points at MM_ORDER_COUNT arrays (any of them
     * may be NULL) of const mm_script_t *, in configuration order. */
    apr_array_header_t *(*scripts[MM_PHASE_COUNT])[MM_ORDER_COUNT];
    unsigned int phases; /* bit n: scripts[n] is set */

    apr_interval_time_t timeout; /* mrubyTimeout; MM_UNSET: inherit; 0: none */
    apr_off_t body_limit;        /* mrubyRequestBodyLimit; MM_UNSET until set or merged */
    int fields_limit;            /* mrubyFormFieldsLimit; MM_UNSET until set or merged */
    int default_ok;              /* mrubyDefaultReturn: 1 OK, 0 DECLINED (DECLINED is MM_UNSET's
                                    -1); MM_UNSET until set or merged */
    int dirwalk;                 /* mrubyDirectoryWalk: 1 On, 0 Off; MM_UNSET (On) until set or merged */
    /* The section's filter and authn scripts (slots.h); NULL: inherited. */
    const mm_slot_script_t *slots[MM_SLOT_COUNT];
} mm_dir_conf_t;

#define MM_UNSET                (-1)
#define MM_DEFAULT_BODY_LIMIT   (8 * 1024 * 1024)
#define MM_DEFAULT_FIELDS_LIMIT 1000
#define MM_MAX_FIELDS_LIMIT     1000000 /* mrubyFormFieldsLimit's maximum */

/* The limits in effect for a request (the defaults where unset). */
apr_off_t mm_config_body_limit(const mm_dir_conf_t *dc);
int mm_config_fields_limit(const mm_dir_conf_t *dc);
/* The result of a script of a request phase whose own default is DECLINED
 * when it ends without Apache.return (mrubyDefaultReturn; DECLINED). */
int mm_config_default_return(const mm_dir_conf_t *dc);

/* Settings of the VMs, from the main server's configuration (one set per
 * process: VMs serve all virtual hosts). Written only while configuration
 * is read. */
typedef struct {
    apr_size_t memory_limit;   /* mrubyMemoryLimit: bytes per VM; 0: none */
    apr_uint64_t max_requests; /* mrubyMaxRequestsPerVM: 0: no limit */
    int server_token;          /* mrubyServerToken: name us in the Server header */
    apr_size_t compile_bytes;  /* mrubyCompileLimit: most bytes of Ruby compiled at once */
    apr_uint64_t compile_ms;   /* mrubyCompileLimit: most CPU time parsing them, ms; 0: none */
    int timeouts;              /* some section sets mrubyTimeout: children start a watchdog */
} mm_settings_t;

#define MM_DEFAULT_COMPILE_BYTES (1024 * 1024)
#define MM_DEFAULT_COMPILE_MS    2000
#define MM_MAX_COMPILE_BYTES     (16 * 1024 * 1024) /* a script file's own maximum (code.c) */
#define MM_MAX_COMPILE_MS        3600000            /* an hour */

extern mm_settings_t mm_settings;
/* Per-server configuration, in pconf. Its directives are global (main
 * server only): virtual hosts inherit the main server's. */
typedef struct {
    apr_array_header_t *caches; /* of mm_cache_t * (cache.c); NULL: unset */
} mm_server_conf_t;

extern const command_rec mm_directives[];

void *mm_config_create_dir(apr_pool_t *p, char *dir);
void *mm_config_merge_dir(apr_pool_t *p, void *basev, void *addv);
void *mm_config_create_server(apr_pool_t *p, server_rec *s);
void *mm_config_merge_server(apr_pool_t *p, void *basev, void *addv);

/* The script a directive names: inline code (code true) or a file, relative
 * to ServerRoot, compiled now; NULL or an error message for the directive. */
const char *mm_config_script(cmd_parms *cmd, int code, const char *arg, int cache, const mm_script_t **out);

/* Resets the per-generation configuration state (pre_config). */
void mm_config_pre_config(apr_pool_t *pconf);

/* The scripts of one phase and order for a request, or NULL. */
static inline const apr_array_header_t *mm_config_scripts(const mm_dir_conf_t *dc, mm_phase_e phase,
                                                          mm_order_e order)
{
    return dc->scripts[phase] ? (*dc->scripts[phase])[order] : NULL;
}

#endif
