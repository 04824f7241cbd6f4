/* auth.h: what the authn and authz providers (authn.c, authz.c) share
 * with their Ruby classes (rb_authn.c, rb_authz.c): the data of one run. */
#ifndef MM_AUTH_H
#define MM_AUTH_H

#include "apr_tables.h"
#include "httpd.h"

#include "phase.h"
#include "slots.h"

/* One authn provider run; on the C stack of the provider function. */
typedef struct {
    const char *user;
    const char *password; /* Basic; NULL for Digest */
    const char *realm;    /* Digest; NULL for Basic */
    const char *rethash;  /* Digest: set by rethash= (copied into r->pool) */
} mm_authn_args_t;

extern const mm_phase_t mm_authn_basic_kind;  /* mrubyAuthnCheckPassword */
extern const mm_phase_t mm_authn_digest_kind; /* mrubyAuthnGetRealmHash */

/* One `Require NAME args...` line of an mruby authz provider, parsed when
 * the configuration is read: each line keeps its own arguments. pconf,
 * read-only afterwards. */
typedef struct {
    const mm_slot_script_t *slot; /* the provider NAME's script */
    const char *line;             /* the arguments as written */
    apr_array_header_t *args;     /* the arguments as words (const char *) */
} mm_authz_line_t;

extern const mm_phase_t mm_authz_kind; /* mrubyAuthzProvider */

/* register_hooks: the `mruby` authn provider. */
void mm_authn_register(apr_pool_t *p);

/* pre_config: forgets the previous configuration's authz providers. */
void mm_authz_pre_config(apr_pool_t *pconf);

#endif
