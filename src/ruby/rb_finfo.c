/* rb_finfo.c: Apache::Finfo, what httpd knows of the request's file
 * (r->finfo, filled during URI mapping), read-only, with the APR file type
 * constants (APR_REG, APR_DIR, ...). */

#include "apr_file_info.h"
#include "httpd.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include <sys/stat.h>

#include "binding.h"
#include "classes.h"

typedef enum {
    FI_PERMISSION,
    FI_MODE,
    FI_FILETYPE,
    FI_USER,
    FI_GROUP,
    FI_DEVICE,
    FI_INODE,
    FI_NLINK,
    FI_SIZE,
    FI_CSIZE,
    FI_ATIME,
    FI_MTIME,
    FI_CTIME,
    FI_COUNT
} mm_finfo_field_e;

static const char *const names[FI_COUNT] = {"permission", "mode",  "filetype", "user", "group",
                                            "device",     "inode", "nlink",    "size", "csize",
                                            "atime",      "mtime", "ctime"};

/* APR's permission bits as a Unix mode (0644 ...). */
static mrb_int unix_mode(apr_fileperms_t p)
{
    mrb_int mode = ((p >> 8) & 7) << 6 | ((p >> 4) & 7) << 3 | (p & 7);

    if (p & APR_USETID) {
        mode |= S_ISUID;
    }
    if (p & APR_GSETID) {
        mode |= S_ISGID;
    }
    if (p & APR_WSTICKY) {
        mode |= S_ISVTX;
    }
    return mode;
}

/* Times are microseconds since the epoch, as mod_mruby gave them. */
static mrb_value finfo_field(mrb_state *mrb, mrb_value self, mm_finfo_field_e field)
{
    const apr_finfo_t *fi = &mm_binding_unwrap(mrb, self, NULL)->finfo;

    switch (field) {
    case FI_PERMISSION:
        return mrb_fixnum_value(fi->protection);
    case FI_MODE:
        return mrb_fixnum_value(unix_mode(fi->protection));
    case FI_FILETYPE:
        return mrb_fixnum_value(fi->filetype);
    case FI_USER:
        return mrb_fixnum_value((mrb_int)fi->user);
    case FI_GROUP:
        return mrb_fixnum_value((mrb_int)fi->group);
    case FI_DEVICE:
        return mrb_fixnum_value((mrb_int)fi->device);
    case FI_INODE:
        return mrb_fixnum_value((mrb_int)fi->inode);
    case FI_NLINK:
        return mrb_fixnum_value(fi->nlink);
    case FI_SIZE:
        return mrb_fixnum_value((mrb_int)fi->size);
    case FI_CSIZE:
        return mrb_fixnum_value((mrb_int)fi->csize);
    case FI_ATIME:
        return mrb_fixnum_value((mrb_int)fi->atime);
    case FI_MTIME:
        return mrb_fixnum_value((mrb_int)fi->mtime);
    case FI_CTIME:
        return mrb_fixnum_value((mrb_int)fi->ctime);
    case FI_COUNT:
        break;
    }
    return mrb_nil_value();
}

MM_INDEXED_FUNCS(finfo_field);

void mm_finfo_init(mrb_state *mrb)
{
    struct RClass *c = mm_binding_define_wrapper_class(mrb, "Finfo", 1);
    int i;

    mm_binding_define_reader(mrb, "finfo", c, 0);
    for (i = 0; i < FI_COUNT; i++) {
        mrb_define_method(mrb, c, names[i], finfo_field_at[i], MRB_ARGS_ANY());
    }
#define MM_CONST(name) mrb_define_const(mrb, c, #name, mrb_fixnum_value(name));
#include "finfo_constants.inc"
#undef MM_CONST
}
