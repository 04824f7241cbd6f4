/* dirwalk.c: mrubyDirectoryWalk Off. httpd maps every request to a file
 * (map_to_storage: core's directory walk, with an lstat of each component
 * of the path, the .htaccess files AllowOverride asks for, and <Directory>
 * and <Files> sections) before its handler runs, even when the handler is
 * a script that answers without any file. mod_proxy skips that for its
 * URLs; a section with mrubyDirectoryWalk Off skips it for its requests.
 *
 * The <Location> sections are known at translate_name (httpd walks them
 * first), not at map_to_storage (which starts from the server's defaults):
 * the first hook notes the setting in the request, the second reads it. The
 * hooks exist only in a configuration that turns the walk off somewhere. */

#include "httpd.h"
#include "http_config.h"
#include "http_protocol.h"
#include "http_request.h"

#include "config.h"
#include "dirwalk.h"
#include "mod_mruby.h"

/* The note of a request whose sections turned the walk off. */
#define NOTE "mruby-no-directory-walk"

static int registered; /* in this generation */

static int note_setting(request_rec *r)
{
    const mm_dir_conf_t *dc = ap_get_module_config(r->per_dir_config, &mruby_module);

    if (dc->dirwalk == 0) {
        apr_table_setn(r->notes, NOTE, "1");
    }
    return DECLINED;
}

/* OK ends map_to_storage before core's walk. TRACE is left to httpd
 * (http_core answers it in this phase, as TraceEnable says). */
static int skip_walk(request_rec *r)
{
    if (r->method_number == M_TRACE || apr_table_get(r->notes, NOTE) == NULL) {
        return DECLINED;
    }
    return OK;
}

void mm_dirwalk_use(void)
{
    if (!registered) {
        registered = 1;
        /* first: a later translate_name hook (mod_rewrite, mod_alias) may
         * end the phase; after every other map_to_storage hook (mod_proxy's,
         * the MapToStorage scripts), before core's walk */
        ap_hook_translate_name(note_setting, NULL, NULL, APR_HOOK_REALLY_FIRST);
        ap_hook_map_to_storage(skip_walk, NULL, NULL, APR_HOOK_LAST + 5);
    }
}

void mm_dirwalk_pre_config(void)
{
    registered = 0;
}
