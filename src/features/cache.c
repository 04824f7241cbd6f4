/* cache.c: the caches of mrubyCache: the shared dictionary (shdict.c,
 * the default) or one of httpd's socache providers.
 *
 * The dictionary is a file: post_config, in the parent, creates it (empty
 * at a start, unless the administrator named it) and gives it to the
 * children's user; child_init opens it in each child. A graceful restart
 * finds the same file again, so entries live on; a stop removes a file
 * nobody named.
 *
 * Life of a socache cache: the directive looks the provider up and creates its
 * instance in pconf (so a missing provider module fails `apachectl -t`);
 * post_config, in the parent, creates the cache's global mutexes and
 * initializes the instance (shmcb allocates its shared memory there, which
 * the children inherit); child_init attaches the mutexes in each child. The
 * instance belongs to pconf: a restart or stop destroys it, and the next
 * generation makes a new one (entries in shmcb are lost then; memcache and
 * redis keep theirs). The mutexes are kept for the life of httpd (see
 * create_mutex).
 *
 * Every entry's id is a 4-byte hash of the key followed by the key: shmcb
 * wants ids of 4 bytes or more and picks a subcache by the first byte, so
 * keys that share a prefix still spread over all subcaches. */

#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "apr_global_mutex.h"
#include "apr_lib.h"
#include "apr_portable.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"
#include "ap_mpm.h"
#include "ap_provider.h"
#include "ap_socache.h"
#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_core.h"
#include "unixd.h"
#include "util_mutex.h"

#include "cache.h"
#include "config.h"
#include "mod_mruby.h"
#include "parse.h"
#include "shdict.h"

APLOG_USE_MODULE(mruby);

/* The Mutex directive's name for our mutexes: `Mutex fcntl:/var/lock
 * mruby-cache`. */
#define MM_CACHE_MUTEX_TYPE "mruby-cache"

/* memcache and redis count expiry in whole seconds, rounded down: half a
 * second more keeps a ttl of n seconds from becoming n - 1. */
#define MM_CACHE_TTL_SLACK apr_time_from_msec(500)

/* One configured cache. Made by the directive in pconf; the mutexes and
 * the instance's shared state are set up by post_config, in pconf too.
 * Children get a copy of it at fork; the fields below "process-local" are
 * written only by the process (and thread) they describe. */
struct mm_cache {
    const char *name;                      /* "default" or the configured name */
    const char *spec;                      /* PROVIDER[:ARGS] as configured, for messages */
    const char *cname;                     /* the provider's namespace: "mruby-NAME" */
    const ap_socache_provider_t *provider; /* NULL for the dictionary */
    ap_socache_instance_t *instance;
    const char *dict_path;  /* the dictionary's file */
    int dict_named;         /* the administrator named it: kept at a stop */
    apr_uint64_t dict_size; /* its capacity */
    apr_size_t max_value;
    server_rec *s;                  /* the main server, for the provider's logs */
    apr_global_mutex_t *lock;       /* incr and synchronize */
    apr_global_mutex_t *store_lock; /* around each provider call, for providers
                                       that are not safe across processes and
                                       threads (shmcb); NULL for the others */
    /* process-local */
    mm_shdict_t *dict;      /* the dictionary, opened by child_init */
    int unusable;           /* the mutexes could not be attached in this child */
    apr_os_thread_t holder; /* the thread holding lock, or 0 */
    int depth;              /* how often holder took it */
};

/* Set by child_init: caches are used in children only. The parent has no
 * business talking to memcache or redis (its connections would be inherited
 * by every child) and runs no requests. */
static int in_child;

/* ---------------------------------------------------------- configuration */

static int valid_name(const char *name)
{
    size_t n = strlen(name);

    return n >= 1 && n <= MM_CACHE_NAME_MAX &&
           strspn(name, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_-") == n;
}

static int is_option(const char *arg)
{
    return strncasecmp(arg, "max-value=", 10) == 0;
}

static const char *parse_option(cmd_parms *cmd, mm_cache_t *c, const char *arg)
{
    apr_uint64_t n;

    if (!is_option(arg)) {
        return apr_psprintf(cmd->pool, "mrubyCache: unknown option '%s' (expected max-value=BYTES)", arg);
    }
    if (mm_parse_size(arg + 10, 1, MM_CACHE_VALUE_MAX, &n) != MM_PARSE_OK) {
        return apr_psprintf(cmd->pool,
                            "mrubyCache: max-value must be a number of bytes from 1 to %d "
                            "(64M), in digits with an optional K, M or G suffix, not '%s'",
                            MM_CACHE_VALUE_MAX, arg + 10);
    }
    c->max_value = (apr_size_t)n;
    return NULL;
}

/* The dictionary's spec: dict[:FILE][(SIZE)]. */
#define DICT_SPEC "dict"

static int is_dict_spec(const char *word)
{
    size_t n = sizeof DICT_SPEC - 1;

    return strncmp(word, DICT_SPEC, n) == 0 && (word[n] == '\0' || word[n] == ':' || word[n] == '(');
}

/* Whether a lone word names a store rather than a cache. */
static int is_spec(const char *word)
{
    const char *sep = ap_strchr_c(word, ':');

    return is_dict_spec(word) || sep ||
           ap_lookup_provider(AP_SOCACHE_PROVIDER_GROUP, word, AP_SOCACHE_PROVIDER_VERSION) != NULL;
}

/* Reads [NAME] [PROVIDER[:ARGS]] [OPTION...] into c: two words before any
 * option are a name and a provider; a lone one is a provider if it names
 * one (shmcb, dict:..., memcache:...), else a name. */
static const char *parse_words(cmd_parms *cmd, mm_cache_t *c, int argc, char *const argv[])
{
    const char *err;
    int i = 0;

    c->name = MM_CACHE_DEFAULT_NAME;
    c->max_value = MM_CACHE_VALUE_DEFAULT;
    c->spec = DICT_SPEC;
    if (argc >= 1 && !is_option(argv[0]) && ((argc >= 2 && !is_option(argv[1])) || !is_spec(argv[0]))) {
        c->name = argv[i++];
        if (!valid_name(c->name)) {
            return apr_psprintf(cmd->pool,
                                "mrubyCache: '%s' is not a cache name (1 to %d letters, digits, '_' or '-')",
                                c->name, MM_CACHE_NAME_MAX);
        }
    }
    if (i < argc && !is_option(argv[i])) {
        c->spec = argv[i++];
    }
    for (; i < argc; i++) {
        if ((err = parse_option(cmd, c, argv[i])) != NULL) {
            return err;
        }
    }
    c->cname = apr_pstrcat(cmd->pool, "mruby-", c->name, NULL);
    return NULL;
}

/* dict[:FILE][(SIZE)]: the file is relative to DefaultRuntimeDir, as
 * shmcb's; without one, mruby-cache-NAME.db there, removed at a stop. */
static const char *parse_dict(cmd_parms *cmd, mm_cache_t *c)
{
    const char *arg = c->spec + sizeof DICT_SPEC - 1;
    const char *open = ap_strchr_c(arg, '(');
    const char *file =
        *arg == ':' ? apr_pstrmemdup(cmd->pool, arg + 1, open ? (size_t)(open - arg - 1) : strlen(arg + 1))
                    : "";
    apr_uint64_t size = MM_SHDICT_SIZE_DEFAULT;

    if (open) {
        const char *close = ap_strchr_c(open, ')');
        char *digits;

        if (close == NULL || close[1] != '\0') {
            return apr_psprintf(cmd->pool, "mrubyCache %s: expected dict[:FILE][(SIZE)]", c->spec);
        }
        digits = apr_pstrmemdup(cmd->temp_pool, open + 1, close - open - 1);
        if (mm_parse_size(digits, MM_SHDICT_SIZE_MIN, MM_SHDICT_SIZE_MAX, &size) != MM_PARSE_OK) {
            return apr_psprintf(cmd->pool,
                                "mrubyCache %s: the size must be a number of bytes from 65536 (64K) to 64G, "
                                "in digits with an optional K, M or G suffix, not '%s'",
                                c->spec, digits);
        }
    }
    c->dict_named = *file != '\0';
    if (!c->dict_named) {
        file = apr_pstrcat(cmd->pool, "mruby-cache-", c->name, ".db", NULL);
    }
    c->dict_path = ap_runtime_dir_relative(cmd->pool, file);
    if (c->dict_path == NULL) {
        return apr_psprintf(cmd->pool, "mrubyCache %s: invalid file name '%s'", c->spec, file);
    }
    c->dict_size = size;
    return NULL;
}

/* Finds the provider (its module must be loaded already) and has it
 * create the instance, in pconf. */
static const char *create_instance(cmd_parms *cmd, mm_cache_t *c)
{
    const char *sep = ap_strchr_c(c->spec, ':');
    const char *name = sep ? apr_pstrmemdup(cmd->pool, c->spec, sep - c->spec) : c->spec;
    const char *err;

    if (is_dict_spec(c->spec)) {
        return parse_dict(cmd, c);
    }
    c->provider = ap_lookup_provider(AP_SOCACHE_PROVIDER_GROUP, name, AP_SOCACHE_PROVIDER_VERSION);
    if (c->provider == NULL) {
        return apr_psprintf(cmd->pool,
                            "mrubyCache: no socache provider '%s': load its module before this line "
                            "(LoadModule socache_%s_module .../mod_socache_%s.so)",
                            name, name, name);
    }
    err = c->provider->create(&c->instance, sep ? sep + 1 : NULL, cmd->temp_pool, cmd->pool);
    return err ? apr_psprintf(cmd->pool, "mrubyCache %s: %s", c->spec, err) : NULL;
}

const char *mm_cache_cmd(cmd_parms *cmd, void *dconf, int argc, char *const argv[])
{
    mm_server_conf_t *sc = ap_get_module_config(cmd->server->module_config, &mruby_module);
    mm_cache_t *c = apr_pcalloc(cmd->pool, sizeof *c);
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    if (err || (err = parse_words(cmd, c, argc, argv)) != NULL) {
        return err;
    }
    if (sc->caches == NULL) {
        sc->caches = apr_array_make(cmd->pool, 2, sizeof(mm_cache_t *));
    }
    if (mm_cache_find(cmd->server, c->name)) {
        return apr_psprintf(cmd->pool, "mrubyCache: the cache '%s' is already configured", c->name);
    }
    if ((err = create_instance(cmd, c)) != NULL) {
        return err;
    }
    APR_ARRAY_PUSH(sc->caches, mm_cache_t *) = c;
    return NULL;
}

static const apr_array_header_t *caches_of(server_rec *s)
{
    const mm_server_conf_t *sc = ap_get_module_config(s->module_config, &mruby_module);

    return sc->caches;
}

/* ------------------------------------------------------------ lifecycle */

int mm_cache_pre_config(apr_pool_t *pconf, apr_pool_t *plog)
{
    apr_status_t rv = ap_mutex_register(pconf, MM_CACHE_MUTEX_TYPE, NULL, APR_LOCK_DEFAULT, 0);

    if (rv != APR_SUCCESS) {
        ap_log_perror(APLOG_MARK, APLOG_CRIT, rv, plog,
                      MM_LOGNO(00900) "cannot register the " MM_CACHE_MUTEX_TYPE " mutex type");
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return OK;
}

/* A pconf cleanup: the generation ends (restart or stop). */
static apr_status_t destroy_instance(void *data)
{
    mm_cache_t *c = data;

    c->provider->destroy(c->instance, c->s);
    return APR_SUCCESS;
}

/* A cache's mutexes outlive the generation that made them: after a
 * graceful restart the old generation's children go on serving requests,
 * with the mutexes they attached. Destroyed with pconf and made anew, the
 * old ones failed in those children ("Invalid argument": a System V
 * semaphore removed under them). So each is made once, in the process's
 * pool, and found again by the cache's name at each restart; the Mutex
 * directive's choice for it is read when it is made (a full stop and start
 * applies a new one). */
static apr_status_t create_mutex(apr_global_mutex_t **mutex, mm_cache_t *c, const char *suffix, server_rec *s,
                                 apr_pool_t *pconf)
{
    const char *id = apr_pstrcat(pconf, c->name, suffix, NULL);
    const char *key = apr_pstrcat(pconf, "mod_mruby cache mutex ", id, NULL);
    apr_global_mutex_t **kept = ap_retained_data_get(key);
    apr_status_t rv;

    if (kept == NULL) {
        kept = ap_retained_data_create(key, sizeof *kept);
    }
    if (*kept) {
        *mutex = *kept;
        return APR_SUCCESS;
    }
    rv = ap_global_mutex_create(kept, NULL, MM_CACHE_MUTEX_TYPE, id, s, s->process->pool, 0);
    if (rv != APR_SUCCESS) {
        *kept = NULL;
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                     MM_LOGNO(00901) "cache '%s': cannot create its " MM_CACHE_MUTEX_TYPE " mutex", c->name);
        return rv;
    }
    *mutex = *kept;
    return APR_SUCCESS;
}

/* What the parent remembers of a dictionary across generations. */
typedef struct {
    pid_t creator;    /* the process that made it: the one that removes it */
    const char *path; /* in the process's pool */
} dict_kept_t;

/* A cleanup of pconf: at a stop, the parent removes the file of a
 * dictionary nobody named. pconf, not the process's pool: that one is
 * destroyed after pconf has unloaded this module. A graceful restart
 * clears pconf too, and children destroy it when they exit: only a parent
 * that exits removes the file. */
static apr_status_t remove_dict(void *data)
{
    dict_kept_t *kept = data;

    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_EXITING && kept->creator == getpid()) {
        mm_shdict_remove_files(kept->path);
    }
    return APR_SUCCESS;
}

/* The readers LMDB makes room for: every thread of two generations of
 * children (a graceful restart's old and new). */
static unsigned int dict_readers(void)
{
    int daemons = 0, threads = 0;
    apr_uint64_t n;

    ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &daemons);
    ap_mpm_query(AP_MPMQ_HARD_LIMIT_THREADS, &threads);
    n = (apr_uint64_t)(daemons > 0 ? daemons : 1) * (threads > 0 ? threads : 1) * 2 + 16;
    return n < 126 ? 126 : n > 65536 ? 65536 : (unsigned int)n;
}

/* Creates the dictionary's file in the parent: empty at the first
 * generation unless it was named, found again at a graceful restart. */
static apr_status_t prepare_dict(mm_cache_t *c, server_rec *s, apr_pool_t *pconf)
{
    const char *key = apr_pstrcat(s->process->pool, "mod_mruby dict ", c->dict_path, NULL);
    dict_kept_t *kept = ap_retained_data_get(key);
    int first = kept == NULL;
    long uid = -1, gid = -1;
    apr_status_t rv;

    if (first) {
        kept = ap_retained_data_create(key, sizeof *kept);
        kept->path = apr_pstrdup(s->process->pool, c->dict_path);
    }
    if (!c->dict_named) {
        apr_pool_cleanup_register(pconf, kept, remove_dict, apr_pool_cleanup_null);
    }
    /* The process that runs the server now (a detached daemon is not the
     * process that read the configuration first). */
    kept->creator = getpid();
    if (geteuid() == 0) {
        uid = (long)ap_unixd_config.user_id;
        gid = (long)ap_unixd_config.group_id;
    }
    rv = mm_shdict_prepare(c->dict_path, c->dict_size, dict_readers(), first && !c->dict_named, uid, gid);
    if (rv != APR_SUCCESS) {
        char buf[256];

        ap_log_error(APLOG_MARK, APLOG_CRIT, 0, s,
                     MM_LOGNO(00300) "cache '%s': cannot create or open its dictionary %s: %s", c->name,
                     c->dict_path, mm_shdict_strerror(rv, buf, sizeof buf));
    }
    return rv;
}

int mm_cache_post_config(apr_pool_t *pconf, apr_pool_t *plog, server_rec *s)
{
    /* What shmcb sizes its index by; the other providers ignore it. */
    static const struct ap_socache_hints hints = {32, 128, apr_time_from_sec(30)};
    const apr_array_header_t *caches = caches_of(s);
    int i;

    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);
        apr_status_t rv;

        c->s = s;
        if (create_mutex(&c->lock, c, "", s, pconf) != APR_SUCCESS) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        if (c->provider == NULL) {
            if (prepare_dict(c, s, pconf) != APR_SUCCESS) {
                return HTTP_INTERNAL_SERVER_ERROR;
            }
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                         MM_LOGNO(00904) "cache '%s': dictionary %s of %" APR_UINT64_T_FMT
                                         " bytes, values up to %" APR_SIZE_T_FMT " bytes",
                         c->name, c->dict_path, c->dict_size, c->max_value);
            continue;
        }
        if ((c->provider->flags & AP_SOCACHE_FLAG_NOTMPSAFE) &&
            create_mutex(&c->store_lock, c, "-store", s, pconf) != APR_SUCCESS) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        rv = c->provider->init(c->instance, c->cname, &hints, s, pconf);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         MM_LOGNO(00902) "cache '%s' (%s): the provider cannot initialize it", c->name,
                         c->spec);
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        apr_pool_cleanup_register(pconf, c, destroy_instance, apr_pool_cleanup_null);
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     MM_LOGNO(00904) "cache '%s': %s, values up to %" APR_SIZE_T_FMT " bytes", c->name,
                     c->spec, c->max_value);
    }
    return OK;
}

static apr_status_t attach_mutex(apr_global_mutex_t **mutex, apr_pool_t *pchild)
{
    return *mutex ? apr_global_mutex_child_init(mutex, apr_global_mutex_lockfile(*mutex), pchild)
                  : APR_SUCCESS;
}

void mm_cache_child_init(apr_pool_t *pchild, server_rec *s)
{
    const apr_array_header_t *caches = caches_of(s);
    int i;

    in_child = 1;
    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);
        apr_status_t rv = attach_mutex(&c->lock, pchild);

        if (rv == APR_SUCCESS) {
            rv = attach_mutex(&c->store_lock, pchild);
        }
        if (rv == APR_SUCCESS && c->provider == NULL) {
            /* Not closed at the child's exit: threads may still be using
             * it; the process's end releases the map and its locks. */
            rv = mm_shdict_open(&c->dict, c->dict_path, c->dict_size, dict_readers());
            if (rv != APR_SUCCESS) {
                char buf[256];

                ap_log_error(APLOG_MARK, APLOG_CRIT, 0, s,
                             MM_LOGNO(00301) "cache '%s': cannot open its dictionary %s in this child: %s; "
                                             "Apache::Cache raises here",
                             c->name, c->dict_path, mm_shdict_strerror(rv, buf, sizeof buf));
                c->unusable = 1;
                continue;
            }
        }
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         MM_LOGNO(00903) "cache '%s': cannot attach its mutex in this child; "
                                         "Apache::Cache raises here",
                         c->name);
            c->unusable = 1;
        }
    }
}

mm_cache_t *mm_cache_find(server_rec *s, const char *name)
{
    const apr_array_header_t *caches = caches_of(s);
    int i;

    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);

        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

const char *mm_cache_unusable(const mm_cache_t *c)
{
    if (!in_child) {
        return "caches are only available in child processes (requests, ChildInit), not in the parent";
    }
    if (c->unusable && c->provider == NULL && c->dict == NULL) {
        return "its dictionary could not be opened in this process (see MRB00301 in the error log)";
    }
    if (c->unusable || c->lock == NULL) {
        return "its mutex could not be attached in this process (see MRB00903 in the error log)";
    }
    return NULL;
}

const char *mm_cache_name(const mm_cache_t *c)
{
    return c->name;
}

apr_size_t mm_cache_max_value(const mm_cache_t *c)
{
    return c->max_value;
}

/* ------------------------------------------------------------- locking */

apr_status_t mm_cache_lock(mm_cache_t *c)
{
    apr_os_thread_t self = apr_os_thread_current();
    apr_status_t rv;

    /* Only the holder ever stores itself here, so reading our own id means
     * we hold the lock. */
    if (__atomic_load_n(&c->holder, __ATOMIC_ACQUIRE) == self) {
        c->depth++;
        return APR_SUCCESS;
    }
    rv = apr_global_mutex_lock(c->lock);
    if (rv == APR_SUCCESS) {
        __atomic_store_n(&c->holder, self, __ATOMIC_RELEASE);
        c->depth = 1;
    }
    return rv;
}

apr_status_t mm_cache_unlock(mm_cache_t *c)
{
    if (--c->depth > 0) {
        return APR_SUCCESS;
    }
    __atomic_store_n(&c->holder, (apr_os_thread_t)0, __ATOMIC_RELEASE);
    return apr_global_mutex_unlock(c->lock);
}

/* ----------------------------------------------------------- operations */

/* The entry's id: FNV-1a hash of the key (4 bytes), then the key. */
static unsigned char *make_id(apr_pool_t *p, const char *key, apr_size_t klen, unsigned int *idlen)
{
    unsigned char *id = apr_palloc(p, klen + 4);
    apr_uint32_t h = 2166136261u;
    apr_size_t i;

    for (i = 0; i < klen; i++) {
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    }
    id[0] = (unsigned char)(h >> 24);
    id[1] = (unsigned char)(h >> 16);
    id[2] = (unsigned char)(h >> 8);
    id[3] = (unsigned char)h;
    memcpy(id + 4, key, klen);
    *idlen = (unsigned int)(klen + 4);
    return id;
}

/* Serializes one provider call when the provider needs it. */
static apr_status_t store_lock(mm_cache_t *c)
{
    return c->store_lock ? apr_global_mutex_lock(c->store_lock) : APR_SUCCESS;
}

static void store_unlock(mm_cache_t *c)
{
    if (c->store_lock) {
        apr_global_mutex_unlock(c->store_lock);
    }
}

/* The dictionary's allocator for the values it reads: the operation's pool. */
static void *pool_alloc(void *pool, apr_size_t n)
{
    return apr_palloc(pool, n);
}

/* The expiry time of a lifetime: none for 0 on the dictionary; the
 * longest memcached takes on the providers. */
static apr_time_t dict_expiry(apr_interval_time_t ttl)
{
    return ttl ? apr_time_now() + ttl : 0;
}

static apr_interval_time_t provider_ttl(apr_interval_time_t ttl)
{
    return ttl ? ttl : apr_time_from_sec(MM_CACHE_TTL_MAX_SEC);
}

/* The dictionary's statuses that have a name of ours. */
static apr_status_t dict_status(apr_status_t rv)
{
    switch (rv) {
    case MM_SHDICT_NOTINT:
        return MM_CACHE_ENOTINT;
    case MM_SHDICT_OVERFLOW:
        return MM_CACHE_EOVERFLOW;
    case MM_SHDICT_TOOLONG:
        return MM_CACHE_ETOOLONG;
    default:
        return rv;
    }
}

int mm_cache_is_dict(const mm_cache_t *c)
{
    return c->provider == NULL;
}

apr_status_t mm_cache_get(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p,
                          char **val, apr_size_t *vlen)
{
    unsigned int idlen, len = (unsigned int)c->max_value;
    unsigned char *id = make_id(p, key, klen, &idlen);
    unsigned char *buf;
    apr_status_t rv;

    if (c->dict) {
        return mm_shdict_get(c->dict, key, klen, pool_alloc, p, val, vlen, NULL);
    }
    buf = apr_palloc(p, c->max_value);
    if ((rv = store_lock(c)) != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->retrieve(c->instance, s, id, idlen, buf, &len, p);
    store_unlock(c);
    if (rv == APR_SUCCESS) {
        *val = (char *)buf;
        *vlen = len;
    }
    return rv;
}

apr_status_t mm_cache_set(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, const char *val,
                          apr_size_t vlen, apr_interval_time_t ttl, mm_cache_mode_e mode, apr_pool_t *p)
{
    unsigned int idlen;
    unsigned char *id, *data;
    apr_time_t expiry;
    apr_status_t rv;

    if (c->dict) {
        return mm_shdict_set(c->dict, key, klen, val, vlen, dict_expiry(ttl),
                             mode == MM_CACHE_ADD       ? MM_SHDICT_ADD
                             : mode == MM_CACHE_REPLACE ? MM_SHDICT_REPLACE
                                                        : MM_SHDICT_SET);
    }
    if (mode != MM_CACHE_SET) {
        return MM_CACHE_ENOTDICT;
    }
    id = make_id(p, key, klen, &idlen);
    /* The provider's own copy: store() takes a non-const buffer. */
    data = apr_pmemdup(p, val, vlen ? vlen : 1);
    expiry = apr_time_now() + provider_ttl(ttl) + MM_CACHE_TTL_SLACK;
    if ((rv = store_lock(c)) != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->store(c->instance, s, id, idlen, expiry, data, (unsigned int)vlen, p);
    store_unlock(c);
    /* memcache answers NOTFOUND when no server is up: for a store, that is
     * a failure, not an absent entry. The memcache and redis clients answer
     * EGENERAL when the server replied with an error (memcached: an item
     * larger than -I, out of memory; redis: maxmemory), whose text would be
     * APR's "Internal error". */
    if (APR_STATUS_IS_NOTFOUND(rv)) {
        return APR_ECONNREFUSED;
    }
    return rv == APR_EGENERAL ? MM_CACHE_EREFUSED : rv;
}

apr_status_t mm_cache_remove(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p)
{
    unsigned int idlen;
    unsigned char *id;
    apr_status_t rv;

    if (c->dict) {
        return mm_shdict_delete(c->dict, key, klen);
    }
    id = make_id(p, key, klen, &idlen);
    if ((rv = store_lock(c)) != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->remove(c->instance, s, id, idlen, p);
    store_unlock(c);
    return rv;
}

apr_status_t mm_cache_incr(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_int64_t by,
                           apr_int64_t init, apr_interval_time_t ttl, apr_pool_t *p, apr_int64_t *result)
{
    apr_status_t rv;
    apr_int64_t n = init;
    char *val, text[24];
    apr_size_t vlen;

    /* One transaction of the dictionary: atomic without the lock. */
    if (c->dict) {
        return dict_status(
            mm_shdict_incr(c->dict, key, klen, by, init, dict_expiry(ttl), c->max_value, result));
    }
    if ((rv = mm_cache_lock(c)) != APR_SUCCESS) {
        return rv;
    }
    rv = mm_cache_get(c, s, key, klen, p, &val, &vlen);
    if (rv == APR_SUCCESS) {
        rv = mm_parse_counter_ok(val, vlen, &n) ? APR_SUCCESS : MM_CACHE_ENOTINT;
    } else if (APR_STATUS_IS_NOTFOUND(rv)) {
        rv = APR_SUCCESS;
    }
    if (rv == APR_SUCCESS && ((by > 0 && n > APR_INT64_MAX - by) || (by < 0 && n < APR_INT64_MIN - by))) {
        rv = MM_CACHE_EOVERFLOW;
    }
    if (rv == APR_SUCCESS) {
        n += by;
        vlen = (apr_size_t)apr_snprintf(text, sizeof text, "%" APR_INT64_T_FMT, n);
        /* A max-value below 20 bytes cannot hold every 64-bit number: a
         * longer one would be stored, but no read could take it back
         * (shmcb answers that there is no entry, the others fail), and the
         * next incr would start again from 0. The entry stays as it was. */
        rv = vlen > c->max_value ? MM_CACHE_ETOOLONG
                                 : mm_cache_set(c, s, key, klen, text, vlen, ttl, MM_CACHE_SET, p);
    }
    mm_cache_unlock(c);
    *result = n;
    return rv;
}

apr_status_t mm_cache_ttl(mm_cache_t *c, const char *key, apr_size_t klen, apr_pool_t *p, apr_time_t *expiry)
{
    char *val;
    apr_size_t vlen;

    return c->dict ? mm_shdict_get(c->dict, key, klen, pool_alloc, p, &val, &vlen, expiry)
                   : MM_CACHE_ENOTDICT;
}

apr_status_t mm_cache_expire(mm_cache_t *c, const char *key, apr_size_t klen, apr_interval_time_t ttl)
{
    return c->dict ? mm_shdict_expire(c->dict, key, klen, dict_expiry(ttl)) : MM_CACHE_ENOTDICT;
}

static void push_key(void *keys, const char *key, apr_size_t klen)
{
    apr_array_header_t *a = keys;
    struct iovec *k = &APR_ARRAY_PUSH(a, struct iovec);

    k->iov_base = apr_pmemdup(a->pool, key, klen);
    k->iov_len = klen;
}

apr_status_t mm_cache_keys(mm_cache_t *c, apr_size_t limit, apr_pool_t *p, apr_array_header_t **keys)
{
    if (c->dict == NULL) {
        return MM_CACHE_ENOTDICT;
    }
    *keys = apr_array_make(p, 16, sizeof(struct iovec));
    return mm_shdict_keys(c->dict, limit, push_key, *keys);
}

apr_status_t mm_cache_flush_all(mm_cache_t *c)
{
    return c->dict ? mm_shdict_flush_all(c->dict) : MM_CACHE_ENOTDICT;
}

apr_status_t mm_cache_flush_expired(mm_cache_t *c, apr_size_t limit, apr_size_t *removed)
{
    return c->dict ? mm_shdict_flush_expired(c->dict, limit, removed) : MM_CACHE_ENOTDICT;
}

apr_status_t mm_cache_space(mm_cache_t *c, apr_uint64_t *capacity, apr_uint64_t *free_bytes)
{
    if (c->dict == NULL) {
        return MM_CACHE_ENOTDICT;
    }
    *capacity = mm_shdict_capacity(c->dict);
    return mm_shdict_free_space(c->dict, free_bytes);
}

const char *mm_cache_strerror(const mm_cache_t *c, apr_status_t rv, char *buf, apr_size_t size)
{
    switch (rv) {
    case MM_CACHE_ENOTDICT:
        apr_snprintf(buf, size, "only the dictionary (mrubyCache %s dict) has it, not %s", c->name, c->spec);
        return buf;
    case MM_SHDICT_FULL:
        apr_snprintf(buf, size,
                     "no room: the live entries fill the dictionary's %" APR_UINT64_T_FMT " bytes "
                     "(nothing was removed to make room)",
                     c->dict_size);
        return buf;
    case MM_CACHE_ENOTINT:
        return "the value is not a decimal integer";
    case MM_CACHE_EOVERFLOW:
        return "the sum does not fit in 64 bits";
    case MM_CACHE_ETOOLONG:
        apr_snprintf(buf, size,
                     "the sum has more digits than the cache's max-value (%" APR_SIZE_T_FMT " bytes)",
                     c->max_value);
        return buf;
    case APR_ENOSPC:
        return "no room for the entry (shmcb: key and value must fit in one of its subcaches)";
    case APR_ENOMEM:
        apr_snprintf(buf, size, "the value is larger than the cache's max-value (%" APR_SIZE_T_FMT " bytes)",
                     c->max_value);
        return buf;
    case APR_ECONNREFUSED:
        return "no server of the cache is reachable";
    case MM_CACHE_EREFUSED:
        return "the cache server refused to store it (too large for it, or out of memory: "
               "see memcached -I, redis maxmemory)";
    default:
        return c->provider ? apr_strerror(rv, buf, size) : mm_shdict_strerror(rv, buf, size);
    }
}
