/* shdict.h: the shared dictionary, mrubyCache's own store: an LMDB file
 * mapped by every process of the server, with a lifetime per entry. It
 * needs neither httpd nor mruby (cache.c puts it behind mrubyCache).
 *
 * Each entry is a key (1..511 bytes) and a value stored after its expiry
 * time (8 bytes, microseconds since the epoch, 0 for none). An expired
 * entry reads as absent; it is removed when a write meets it, by
 * mm_shdict_flush_expired, and before a write is refused for want of room.
 * Nothing else is ever removed: when the entries fill the dictionary's
 * capacity, writes that need more room fail with MM_SHDICT_FULL. */
#ifndef MM_SHDICT_H
#define MM_SHDICT_H

#include "apr.h"
#include "apr_errno.h"
#include "apr_time.h"

#include <stddef.h>

typedef struct mm_shdict mm_shdict_t;

/* The smallest and largest capacity (bytes of the entries' B+tree pages). */
#define MM_SHDICT_SIZE_MIN     (64 * 1024)
#define MM_SHDICT_SIZE_MAX     ((apr_uint64_t)64 * 1024 * 1024 * 1024)
#define MM_SHDICT_SIZE_DEFAULT (16 * 1024 * 1024)

/* Statuses beside APR's (APR_NOTFOUND: no live entry). */
#define MM_SHDICT_FULL     (APR_OS_START_USERERR + 910) /* no room: nothing was written */
#define MM_SHDICT_EXISTS   (APR_OS_START_USERERR + 911) /* add: the key has a live entry */
#define MM_SHDICT_NOTINT   (APR_OS_START_USERERR + 912) /* incr: the value is not an integer */
#define MM_SHDICT_OVERFLOW (APR_OS_START_USERERR + 913) /* incr: the sum does not fit */
#define MM_SHDICT_TOOLONG  (APR_OS_START_USERERR + 914) /* incr: the sum's text is too long */
#define MM_SHDICT_LMDB     (APR_OS_START_USERERR + 920) /* + an LMDB error (mm_shdict_strerror) */

/* Creates the file at path (and path-lock) if needed, sized for capacity,
 * and checks it can be opened; owned by uid:gid when they are not -1.
 * fresh: empty it first (a store nobody named: its entries are not to
 * outlive the server). Called by the parent; it keeps nothing open. */
apr_status_t mm_shdict_prepare(const char *path, apr_uint64_t capacity, unsigned int readers, int fresh,
                               long uid, long gid);

/* Opens the dictionary in this process (after fork: LMDB's handles are
 * not inherited); clears the reader slots of processes that died. */
apr_status_t mm_shdict_open(mm_shdict_t **d, const char *path, apr_uint64_t capacity, unsigned int readers);
void mm_shdict_close(mm_shdict_t *d);

/* Removes the files of a store (path and path-lock). */
void mm_shdict_remove_files(const char *path);

/* How a value read is copied out: alloc(ctx, n) returns n bytes. */
typedef void *(*mm_shdict_alloc_f)(void *ctx, apr_size_t n);

/* get: the value of a live entry, copied; APR_NOTFOUND if none. expiry
 * (when not NULL) gets its expiry time (0: none). */
apr_status_t mm_shdict_get(mm_shdict_t *d, const char *key, apr_size_t klen, mm_shdict_alloc_f alloc,
                           void *ctx, char **val, apr_size_t *vlen, apr_time_t *expiry);

/* How set stores. */
typedef enum {
    MM_SHDICT_SET,     /* always */
    MM_SHDICT_ADD,     /* only when there is no live entry (else MM_SHDICT_EXISTS) */
    MM_SHDICT_REPLACE, /* only when there is one (else APR_NOTFOUND) */
} mm_shdict_mode_e;

/* set: stores val with the expiry time (0: none). */
apr_status_t mm_shdict_set(mm_shdict_t *d, const char *key, apr_size_t klen, const char *val, apr_size_t vlen,
                           apr_time_t expiry, mm_shdict_mode_e mode);

/* incr: adds by to the decimal integer of the live entry (init when there
 * is none) in one transaction. expiry: 0 keeps an entry's expiry (a new one
 * has none), else the new one. The text of the sum may have max_text bytes. */
apr_status_t mm_shdict_incr(mm_shdict_t *d, const char *key, apr_size_t klen, apr_int64_t by,
                            apr_int64_t init, apr_time_t expiry, apr_size_t max_text, apr_int64_t *result);

/* delete: APR_NOTFOUND when there was no live entry. */
apr_status_t mm_shdict_delete(mm_shdict_t *d, const char *key, apr_size_t klen);

/* expire: gives a live entry a new expiry time (0: none). */
apr_status_t mm_shdict_expire(mm_shdict_t *d, const char *key, apr_size_t klen, apr_time_t expiry);

/* keys: calls each(ctx, key, klen) for up to limit live keys (0: all), in
 * the order of their bytes. */
apr_status_t mm_shdict_keys(mm_shdict_t *d, apr_size_t limit, void (*each)(void *, const char *, apr_size_t),
                            void *ctx);

/* flush_all: removes every entry. flush_expired: removes up to limit
 * expired entries (0: all), *removed of them. */
apr_status_t mm_shdict_flush_all(mm_shdict_t *d);
apr_status_t mm_shdict_flush_expired(mm_shdict_t *d, apr_size_t limit, apr_size_t *removed);

/* The capacity in bytes, and what the entries leave of it. */
apr_uint64_t mm_shdict_capacity(const mm_shdict_t *d);
apr_status_t mm_shdict_free_space(mm_shdict_t *d, apr_uint64_t *bytes);

/* Text for a status of the functions above. */
const char *mm_shdict_strerror(apr_status_t rv, char *buf, apr_size_t size);

#endif
