/* shdict.c: the shared dictionary on LMDB (see shdict.h).
 *
 * Why LMDB: its B+tree lives in one memory-mapped file that every process
 * maps; a write is a transaction that copies the pages it changes and
 * publishes them by writing a meta page last, so a process killed in the
 * middle of one leaves the previous state whole; its one writer lock is a
 * robust process-shared mutex, which the next writer recovers when its
 * holder died; readers take no lock. So nothing here allocates shared
 * memory or keeps a lock of its own.
 *
 * The file is opened with MDB_WRITEMAP (commits write the map, no copy
 * through write(2)) and MDB_NOSYNC (no fsync per commit): a process that
 * dies loses nothing committed, a system crash may lose the last commits
 * (docs/directives.md says so).
 *
 * Room: the map is the capacity plus headroom. Copy-on-write needs free
 * pages even to delete, so the capacity is ours to enforce: a write that
 * makes the tree's pages (branch, leaf, overflow) exceed it is undone and
 * refused, after one attempt to make room by removing expired entries. */

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apr_strings.h"

#include "parse.h"
#include "shdict.h"

struct mm_shdict {
    MDB_env *env;
    MDB_dbi dbi;
    apr_uint64_t capacity;
};

/* Each value starts with its expiry time, microseconds since the epoch
 * (native byte order: the file is this host's), 0 for none. */
#define HEAD sizeof(apr_int64_t)

/* Entries removed per transaction by flush_expired, and entries looked at:
 * a transaction copies every page it changes, so a long one would need as
 * many free pages as the tree has. */
#define FLUSH_BATCH 256
#define SCAN_BATCH  4096

static apr_status_t status_of(int rc)
{
    if (rc == 0) {
        return APR_SUCCESS;
    }
    if (rc == MDB_NOTFOUND) {
        return APR_NOTFOUND;
    }
    if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) {
        return MM_SHDICT_FULL;
    }
    if (rc > 0) {
        return rc; /* an errno: APR's status for it */
    }
    return MM_SHDICT_LMDB + (rc - MDB_KEYEXIST);
}

/* The map: the capacity, a quarter more and 1 MB for the copies of pages
 * a write makes before the old ones are free again, and LMDB's free list. */
static size_t map_size(apr_uint64_t capacity)
{
    apr_uint64_t size = capacity + capacity / 4 + 1024 * 1024;

    return (size_t)((size + 65535) & ~(apr_uint64_t)65535);
}

static apr_status_t env_open(MDB_env **env, const char *path, apr_uint64_t capacity, unsigned int readers)
{
    int rc = mdb_env_create(env);

    if (rc != 0) {
        return status_of(rc);
    }
    if ((rc = mdb_env_set_mapsize(*env, map_size(capacity))) != 0 ||
        (rc = mdb_env_set_maxreaders(*env, readers)) != 0 ||
        (rc = mdb_env_open(*env, path, MDB_NOSUBDIR | MDB_WRITEMAP | MDB_NOSYNC | MDB_NORDAHEAD, 0600)) !=
            0) {
        mdb_env_close(*env);
        *env = NULL;
        return status_of(rc);
    }
    return APR_SUCCESS;
}

void mm_shdict_remove_files(const char *path)
{
    size_t n = strlen(path);
    char *lock = malloc(n + 6);

    unlink(path);
    if (lock) {
        memcpy(lock, path, n);
        memcpy(lock + n, "-lock", 6);
        unlink(lock);
        free(lock);
    }
}

static apr_status_t give_files(const char *path, long uid, long gid)
{
    size_t n = strlen(path);
    char *lock;
    int failed;

    if (uid == -1 && gid == -1) {
        return APR_SUCCESS;
    }
    if ((lock = malloc(n + 6)) == NULL) {
        return APR_ENOMEM;
    }
    memcpy(lock, path, n);
    memcpy(lock + n, "-lock", 6);
    failed = chown(path, (uid_t)uid, (gid_t)gid) != 0 || chown(lock, (uid_t)uid, (gid_t)gid) != 0;
    free(lock);
    return failed ? errno : APR_SUCCESS;
}

apr_status_t mm_shdict_prepare(const char *path, apr_uint64_t capacity, unsigned int readers, int fresh,
                               long uid, long gid)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    apr_status_t rv;
    int rc;

    if (fresh) {
        mm_shdict_remove_files(path);
    }
    if ((rv = env_open(&env, path, capacity, readers)) != APR_SUCCESS) {
        return rv;
    }
    /* A file that is not a dictionary (or of another LMDB version) fails
     * here, in the parent, rather than in every child. */
    rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    return rc ? status_of(rc) : give_files(path, uid, gid);
}

apr_status_t mm_shdict_open(mm_shdict_t **dp, const char *path, apr_uint64_t capacity, unsigned int readers)
{
    mm_shdict_t *d = calloc(1, sizeof *d);
    MDB_txn *txn;
    apr_status_t rv;
    int rc, dead;

    if (d == NULL) {
        return APR_ENOMEM;
    }
    if ((rv = env_open(&d->env, path, capacity, readers)) != APR_SUCCESS) {
        free(d);
        return rv;
    }
    /* Processes killed while reading leave their reader slot taken, and
     * the pages it pins unusable: free them. */
    mdb_reader_check(d->env, &dead);
    rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &d->dbi);
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
    }
    if (rc != 0) {
        mm_shdict_close(d);
        return status_of(rc);
    }
    d->capacity = capacity;
    *dp = d;
    return APR_SUCCESS;
}

void mm_shdict_close(mm_shdict_t *d)
{
    if (d) {
        mdb_env_close(d->env);
        free(d);
    }
}

/* ------------------------------------------------------------ entries */

static apr_time_t expiry_of(const MDB_val *v)
{
    apr_int64_t t;

    memcpy(&t, v->mv_data, HEAD);
    return t;
}

/* A value too short to have its head is no entry of ours: it counts as
 * expired, so it can be removed. */
static int live(const MDB_val *v, apr_time_t now)
{
    apr_time_t t;

    if (v->mv_size < HEAD) {
        return 0;
    }
    t = expiry_of(v);
    return t == 0 || t > now;
}

static void key_val(MDB_val *k, const char *key, apr_size_t klen)
{
    k->mv_size = klen;
    k->mv_data = (void *)key;
}

/* Stores head + val at k, in txn. */
static int put(mm_shdict_t *d, MDB_txn *txn, MDB_val *k, apr_time_t expiry, const char *val, apr_size_t vlen)
{
    MDB_val v;
    int rc;

    v.mv_size = HEAD + vlen;
    v.mv_data = NULL;
    rc = mdb_put(txn, d->dbi, k, &v, MDB_RESERVE);
    if (rc == 0) {
        memcpy(v.mv_data, &expiry, HEAD);
        if (vlen) {
            memcpy((char *)v.mv_data + HEAD, val, vlen);
        }
    }
    return rc;
}

static apr_uint64_t tree_bytes(mm_shdict_t *d, MDB_txn *txn)
{
    MDB_stat st;

    if (mdb_stat(txn, d->dbi, &st) != 0) {
        return 0;
    }
    return (apr_uint64_t)(st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize;
}

/* A change made in one write transaction. */
typedef apr_status_t (*change_f)(mm_shdict_t *d, MDB_txn *txn, void *arg, apr_time_t now);

static apr_status_t change_once(mm_shdict_t *d, change_f change, void *arg)
{
    MDB_txn *txn;
    apr_uint64_t before, after;
    apr_status_t rv;
    int rc = mdb_txn_begin(d->env, NULL, 0, &txn);

    if (rc != 0) {
        return status_of(rc);
    }
    before = tree_bytes(d, txn);
    rv = change(d, txn, arg, apr_time_now());
    if (rv == APR_SUCCESS) {
        after = tree_bytes(d, txn);
        /* Only a write that grows the tree can be refused: rewriting an
         * entry in place, and removing one, always succeed. */
        if (after > before && after > d->capacity) {
            rv = MM_SHDICT_FULL;
        }
    }
    /* NOTFOUND and EXISTS commit: the change may have removed an expired
     * entry on its way. */
    if (rv != APR_SUCCESS && rv != APR_NOTFOUND && rv != MM_SHDICT_EXISTS) {
        mdb_txn_abort(txn);
        return rv;
    }
    rc = mdb_txn_commit(txn);
    return rc ? status_of(rc) : rv;
}

/* Runs change; when there is no room, removes the expired entries (and
 * the reader slots of dead processes) and tries once more. */
static apr_status_t change_entries(mm_shdict_t *d, change_f change, void *arg)
{
    apr_status_t rv = change_once(d, change, arg);
    apr_size_t removed;
    int dead;

    if (rv != MM_SHDICT_FULL) {
        return rv;
    }
    mdb_reader_check(d->env, &dead);
    if (mm_shdict_flush_expired(d, 0, &removed) != APR_SUCCESS || (removed == 0 && dead == 0)) {
        return MM_SHDICT_FULL;
    }
    return change_once(d, change, arg);
}

apr_status_t mm_shdict_get(mm_shdict_t *d, const char *key, apr_size_t klen, mm_shdict_alloc_f alloc,
                           void *ctx, char **val, apr_size_t *vlen, apr_time_t *expiry)
{
    MDB_txn *txn;
    MDB_val k, v;
    apr_status_t rv = APR_NOTFOUND;
    int rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn);

    if (rc != 0) {
        return status_of(rc);
    }
    key_val(&k, key, klen);
    rc = mdb_get(txn, d->dbi, &k, &v);
    if (rc == 0 && live(&v, apr_time_now())) {
        *vlen = v.mv_size - HEAD;
        *val = alloc(ctx, *vlen ? *vlen : 1);
        memcpy(*val, (char *)v.mv_data + HEAD, *vlen);
        if (expiry) {
            *expiry = expiry_of(&v);
        }
        rv = APR_SUCCESS;
    } else if (rc != 0 && rc != MDB_NOTFOUND) {
        rv = status_of(rc);
    }
    mdb_txn_abort(txn);
    return rv;
}

typedef struct {
    MDB_val k;
    const char *val;
    apr_size_t vlen;
    apr_time_t expiry;
    mm_shdict_mode_e mode;
    apr_int64_t by, init, result;
    apr_size_t max_text;
} change_t;

/* Whether k has a live entry (in *v); removes an expired one. */
static apr_status_t find_live(mm_shdict_t *d, MDB_txn *txn, MDB_val *k, MDB_val *v, apr_time_t now,
                              int *found)
{
    int rc = mdb_get(txn, d->dbi, k, v);

    *found = 0;
    if (rc == MDB_NOTFOUND) {
        return APR_SUCCESS;
    }
    if (rc != 0) {
        return status_of(rc);
    }
    if (live(v, now)) {
        *found = 1;
        return APR_SUCCESS;
    }
    return status_of(mdb_del(txn, d->dbi, k, NULL));
}

static apr_status_t set_change(mm_shdict_t *d, MDB_txn *txn, void *arg, apr_time_t now)
{
    change_t *c = arg;
    MDB_val v;
    apr_status_t rv;
    int found;

    if (c->mode != MM_SHDICT_SET) {
        if ((rv = find_live(d, txn, &c->k, &v, now, &found)) != APR_SUCCESS) {
            return rv;
        }
        if (c->mode == MM_SHDICT_ADD && found) {
            return MM_SHDICT_EXISTS;
        }
        if (c->mode == MM_SHDICT_REPLACE && !found) {
            return APR_NOTFOUND;
        }
    }
    return status_of(put(d, txn, &c->k, c->expiry, c->val, c->vlen));
}

apr_status_t mm_shdict_set(mm_shdict_t *d, const char *key, apr_size_t klen, const char *val, apr_size_t vlen,
                           apr_time_t expiry, mm_shdict_mode_e mode)
{
    change_t c;

    key_val(&c.k, key, klen);
    c.val = val;
    c.vlen = vlen;
    c.expiry = expiry;
    c.mode = mode;
    return change_entries(d, set_change, &c);
}

static apr_status_t incr_change(mm_shdict_t *d, MDB_txn *txn, void *arg, apr_time_t now)
{
    change_t *c = arg;
    apr_int64_t n = c->init;
    apr_time_t expiry = c->expiry;
    char text[24];
    apr_size_t len;
    MDB_val v;
    apr_status_t rv;
    int found;

    if ((rv = find_live(d, txn, &c->k, &v, now, &found)) != APR_SUCCESS) {
        return rv;
    }
    if (found) {
        if (!mm_parse_counter_ok((char *)v.mv_data + HEAD, v.mv_size - HEAD, &n)) {
            return MM_SHDICT_NOTINT;
        }
        if (expiry == 0) {
            expiry = expiry_of(&v);
        }
    }
    if ((c->by > 0 && n > APR_INT64_MAX - c->by) || (c->by < 0 && n < APR_INT64_MIN - c->by)) {
        return MM_SHDICT_OVERFLOW;
    }
    n += c->by;
    len = (apr_size_t)apr_snprintf(text, sizeof text, "%" APR_INT64_T_FMT, n);
    if (len > c->max_text) {
        return MM_SHDICT_TOOLONG;
    }
    c->result = n;
    return status_of(put(d, txn, &c->k, expiry, text, len));
}

apr_status_t mm_shdict_incr(mm_shdict_t *d, const char *key, apr_size_t klen, apr_int64_t by,
                            apr_int64_t init, apr_time_t expiry, apr_size_t max_text, apr_int64_t *result)
{
    change_t c;
    apr_status_t rv;

    key_val(&c.k, key, klen);
    c.by = by;
    c.init = init;
    c.expiry = expiry;
    c.max_text = max_text;
    c.result = 0;
    rv = change_entries(d, incr_change, &c);
    *result = c.result;
    return rv;
}

static apr_status_t delete_change(mm_shdict_t *d, MDB_txn *txn, void *arg, apr_time_t now)
{
    change_t *c = arg;
    MDB_val v;
    int rc = mdb_get(txn, d->dbi, &c->k, &v);
    int was_live = rc == 0 && live(&v, now);

    if (rc != 0) {
        return status_of(rc);
    }
    rc = mdb_del(txn, d->dbi, &c->k, NULL);
    return rc ? status_of(rc) : was_live ? APR_SUCCESS : APR_NOTFOUND;
}

apr_status_t mm_shdict_delete(mm_shdict_t *d, const char *key, apr_size_t klen)
{
    change_t c;

    key_val(&c.k, key, klen);
    return change_entries(d, delete_change, &c);
}

static apr_status_t expire_change(mm_shdict_t *d, MDB_txn *txn, void *arg, apr_time_t now)
{
    change_t *c = arg;
    MDB_val v;
    apr_status_t rv;
    char *copy;
    int found, rc;

    if ((rv = find_live(d, txn, &c->k, &v, now, &found)) != APR_SUCCESS || !found) {
        return rv != APR_SUCCESS ? rv : APR_NOTFOUND;
    }
    /* v points into the map, at a page the put below replaces. */
    if ((copy = malloc(v.mv_size)) == NULL) {
        return APR_ENOMEM;
    }
    memcpy(copy, v.mv_data, v.mv_size);
    rc = put(d, txn, &c->k, c->expiry, copy + HEAD, v.mv_size - HEAD);
    free(copy);
    return status_of(rc);
}

apr_status_t mm_shdict_expire(mm_shdict_t *d, const char *key, apr_size_t klen, apr_time_t expiry)
{
    change_t c;

    key_val(&c.k, key, klen);
    c.expiry = expiry;
    return change_entries(d, expire_change, &c);
}

apr_status_t mm_shdict_keys(mm_shdict_t *d, apr_size_t limit, void (*each)(void *, const char *, apr_size_t),
                            void *ctx)
{
    apr_time_t now = apr_time_now();
    apr_size_t n = 0;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn);

    if (rc != 0) {
        return status_of(rc);
    }
    if ((rc = mdb_cursor_open(txn, d->dbi, &cur)) == 0) {
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && (limit == 0 || n < limit);
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (live(&v, now)) {
                each(ctx, k.mv_data, k.mv_size);
                n++;
            }
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? APR_SUCCESS : status_of(rc);
}

apr_status_t mm_shdict_flush_all(mm_shdict_t *d)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(d->env, NULL, 0, &txn);

    if (rc != 0) {
        return status_of(rc);
    }
    rc = mdb_drop(txn, d->dbi, 0);
    rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
    return status_of(rc);
}

apr_status_t mm_shdict_flush_expired(mm_shdict_t *d, apr_size_t limit, apr_size_t *removed)
{
    char next[512]; /* where the next transaction starts: LMDB's longest key */
    size_t next_len = 0;
    int more = 1;

    *removed = 0;
    while (more && (limit == 0 || *removed < limit)) {
        apr_time_t now = apr_time_now();
        MDB_txn *txn;
        MDB_cursor *cur;
        MDB_val k, v;
        int rc = mdb_txn_begin(d->env, NULL, 0, &txn), batch = 0, scanned = 0;

        if (rc != 0) {
            return status_of(rc);
        }
        if ((rc = mdb_cursor_open(txn, d->dbi, &cur)) != 0) {
            mdb_txn_abort(txn);
            return status_of(rc);
        }
        k.mv_size = next_len;
        k.mv_data = next;
        rc = mdb_cursor_get(cur, &k, &v, next_len ? MDB_SET_RANGE : MDB_FIRST);
        while (rc == 0 && batch < FLUSH_BATCH && scanned < SCAN_BATCH && (limit == 0 || *removed < limit)) {
            scanned++;
            if (!live(&v, now)) {
                if ((rc = mdb_cursor_del(cur, 0)) != 0) {
                    break;
                }
                batch++;
                (*removed)++;
            }
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        }
        more = rc == 0 && k.mv_size <= sizeof next;
        if (more) {
            memcpy(next, k.mv_data, k.mv_size);
            next_len = k.mv_size;
        }
        mdb_cursor_close(cur);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            mdb_txn_abort(txn);
            return status_of(rc);
        }
        if ((rc = mdb_txn_commit(txn)) != 0) {
            return status_of(rc);
        }
    }
    return APR_SUCCESS;
}

apr_uint64_t mm_shdict_capacity(const mm_shdict_t *d)
{
    return d->capacity;
}

apr_status_t mm_shdict_free_space(mm_shdict_t *d, apr_uint64_t *bytes)
{
    MDB_txn *txn;
    apr_uint64_t used;
    int rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn);

    if (rc != 0) {
        return status_of(rc);
    }
    used = tree_bytes(d, txn);
    mdb_txn_abort(txn);
    *bytes = used < d->capacity ? d->capacity - used : 0;
    return APR_SUCCESS;
}

const char *mm_shdict_strerror(apr_status_t rv, char *buf, apr_size_t size)
{
    if (rv >= MM_SHDICT_LMDB && rv < MM_SHDICT_LMDB + 100) {
        return mdb_strerror((int)(rv - MM_SHDICT_LMDB) + MDB_KEYEXIST);
    }
    switch (rv) {
    case MM_SHDICT_FULL:
        return "the dictionary is full (its live entries fill its size)";
    case MM_SHDICT_EXISTS:
        return "the key has an entry";
    case MM_SHDICT_NOTINT:
        return "the value is not a decimal integer";
    case MM_SHDICT_OVERFLOW:
        return "the sum does not fit in 64 bits";
    default:
        return apr_strerror(rv, buf, size);
    }
}
