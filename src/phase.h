/* phase.h: the table of scriptable phases. One row drives the directives
 * (mruby<Stem><Order>[Code]), the per-section config slots and the httpd hook
 * functions, so adding a phase is adding a row. */
#ifndef MM_PHASE_H
#define MM_PHASE_H

#include "httpd.h"

/* Columns:
 *   ID       enum suffix: MM_PHASE_<ID>
 *   STEM     directive stem: mruby<STEM>, mruby<STEM>Code, mruby<STEM>First, ...
 *   SHAPE    the hook signature family, picks the hook function template
 *            (see phase.c): HANDLER is the content handler.
 *   HOOK     httpd hook: registered with ap_hook_<HOOK>
 *   DEFAULT  the phase result when the script never calls Apache.return
 *   ONERROR  the phase result when the script raises
 */
#define MM_PHASES(X) X(HANDLER, "Handler", HANDLER, handler, OK, HTTP_INTERNAL_SERVER_ERROR)

typedef enum {
#define MM_PHASE_ENUM(ID, STEM, SHAPE, HOOK, DEFAULT, ONERROR) MM_PHASE_##ID,
    MM_PHASES(MM_PHASE_ENUM)
#undef MM_PHASE_ENUM
        MM_PHASE_COUNT
} mm_phase_e;

/* The three hook positions a script can take within a phase. */
typedef enum { MM_ORDER_FIRST, MM_ORDER_MIDDLE, MM_ORDER_LAST, MM_ORDER_COUNT } mm_order_e;

typedef struct {
    const char *stem;   /* "Handler": names the phase in directives and logs */
    int default_result; /* when Apache.return was not called */
    int error_result;   /* when the script raised */
} mm_phase_t;

extern const mm_phase_t mm_phases[MM_PHASE_COUNT];

/* Registers one httpd hook per phase and order (called from register_hooks). */
void mm_phase_register_hooks(apr_pool_t *p);

/* The handler names this module answers to. */
#define MM_HANDLER_FILE   "mruby-script"        /* run r->filename */
#define MM_HANDLER_NATIVE "mruby-native-script" /* run the section's scripts */

#endif
