/* phase.h: the table of scriptable phases. One row drives the directives
 * (mruby<Stem><Order>[Code]), the per-section config slots and the httpd hook
 * functions, so adding a phase is adding a row. */
#ifndef MM_PHASE_H
#define MM_PHASE_H

#include "httpd.h"

/* Columns:
 *   ID       enum suffix: MM_PHASE_<ID>
 *   STEM     directive stem: mruby<STEM>, mruby<STEM>Code, mruby<STEM>First, ...
 *   SHAPE    the hook's signature family, which picks the hook function
 *            template in phase.c: REQUEST int(request_rec *), VOID
 *            void(request_rec *), QUICK the quick handler, HANDLER the content
 *            handler, POSTCONFIG and CHILDINIT the server phases, CHILDEXIT
 *            the child's exit (its child_init hook arms a cleanup of pchild),
 *            TIMERS the child's timer thread (its child_init hook starts it)
 *   HOOK     httpd hook: registered with ap_hook_<HOOK>
 *   WHERE    where its directives may appear, i.e. which sections httpd has
 *            applied when the phase runs: DIR (server, virtual host, any
 *            section), URI (no <Directory>, <Files> or <Proxy>: the file is not known
 *            yet), SERVER (server and virtual host only), GLOBAL (main server)
 *   DEFAULT  the phase result when the script never calls Apache.return
 *   ONERROR  the phase result when the script raises (access phases deny)
 *
 * Rows are in the order httpd runs the phases. */
/* clang-format off */
#define MM_PHASES(X)                                                                                       \
    X(POST_READ_REQUEST, "PostReadRequest", REQUEST,    post_read_request, SERVER, DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(QUICK_HANDLER,     "QuickHandler",    QUICK,      quick_handler,     SERVER, DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(TRANSLATE_NAME,    "TranslateName",   REQUEST,    translate_name,    URI,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(MAP_TO_STORAGE,    "MapToStorage",    REQUEST,    map_to_storage,    SERVER, DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(HEADER_PARSER,     "HeaderParser",    REQUEST,    header_parser,     DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(ACCESS_CHECKER,    "AccessChecker",   REQUEST,    access_checker,    DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(CHECK_USER_ID,     "CheckUserId",     REQUEST,    check_user_id,     DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(AUTH_CHECKER,      "AuthChecker",     REQUEST,    auth_checker,      DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(TYPE_CHECKER,      "TypeChecker",     REQUEST,    type_checker,      DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(FIXUPS,            "Fixups",          REQUEST,    fixups,            DIR,    DECLINED, HTTP_INTERNAL_SERVER_ERROR) \
    X(INSERT_FILTER,     "InsertFilter",    VOID,       insert_filter,     DIR,    DECLINED, DECLINED)                   \
    X(HANDLER,           "Handler",         HANDLER,    handler,           DIR,    OK,       HTTP_INTERNAL_SERVER_ERROR) \
    X(LOG_TRANSACTION,   "LogTransaction",  REQUEST,    log_transaction,   DIR,    DECLINED, DECLINED)                   \
    X(POST_CONFIG,       "PostConfig",      POSTCONFIG, post_config,       GLOBAL, OK,       HTTP_INTERNAL_SERVER_ERROR) \
    X(CHILD_INIT,        "ChildInit",       CHILDINIT,  child_init,        GLOBAL, OK,       DECLINED)                   \
    X(CHILD_EXIT,        "ChildExit",       CHILDEXIT,  child_init,        GLOBAL, OK,       DECLINED)                   \
    X(TIMERS,            "Timers",          TIMERS,     child_init,        GLOBAL, OK,       DECLINED)
/* clang-format on */

typedef enum {
#define MM_PHASE_ENUM(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR) MM_PHASE_##ID,
    MM_PHASES(MM_PHASE_ENUM)
#undef MM_PHASE_ENUM
        MM_PHASE_COUNT
} mm_phase_e;

/* The three hook positions a script can take within a phase. */
typedef enum { MM_ORDER_FIRST, MM_ORDER_MIDDLE, MM_ORDER_LAST, MM_ORDER_COUNT } mm_order_e;

/* Where a phase's directives are allowed (the WHERE column). */
typedef enum { MM_WHERE_DIR, MM_WHERE_URI, MM_WHERE_SERVER, MM_WHERE_GLOBAL } mm_where_e;

/* What the run harness needs to know about a kind of script run: a phase
 * of the table, or another kind (a filter, a provider) described by a
 * static mm_phase_t of the file that runs it. */
typedef struct {
    const char *stem;   /* "Handler": names the phase in directives and logs */
    mm_where_e where;   /* where its directives may appear */
    int default_result; /* when Apache.return was not called */
    int error_result;   /* when the script raised */
    unsigned int flags; /* MM_KIND_* */
} mm_phase_t;

/* The script's output is the response: sent with EOS when the phase ends,
 * dropped when it declines (Handler, QuickHandler). */
#define MM_KIND_CONTENT 0x1
/* Apache.rputs is refused (filters and providers work on other data). */
#define MM_KIND_NO_OUTPUT 0x2
/* The run's result is Apache.return's value as given (an authn or authz
 * code, a filter's verdict), or the kind's default or error result; the
 * caller checks it. The response output is none of the run's business. */
#define MM_KIND_OWN_RESULT 0x4

extern const mm_phase_t mm_phases[MM_PHASE_COUNT];

/* A phase nobody scripts costs nothing: it has no hook. register_hooks
 * registers only the content handler's Middle hook (files given to
 * AddHandler mruby-script need no directive of ours); the directives call
 * mm_phase_use, which registers a phase's hook of an order the first time
 * a section scripts it. httpd sorts hooks once the configuration is read. */
void mm_phase_register_hooks(apr_pool_t *p);
void mm_phase_pre_config(void); /* a new generation: nothing in use */
void mm_phase_use(mm_phase_e phase, mm_order_e order);
/* Some directive of this generation scripts the phase. */
int mm_phase_in_use(mm_phase_e phase);

/* The handler names this module answers to. */
#define MM_HANDLER_FILE   "mruby-script"        /* run r->filename */
#define MM_HANDLER_NATIVE "mruby-native-script" /* run the section's scripts */

#endif
