/* crypto.c: the helpers the libcrypto bindings share (see crypto.h). */

#include <string.h>
#include <strings.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/string.h>
#include <mruby/variable.h>
#include <openssl/err.h>

#include "base64.h"
#include "crypto.h"

static const struct {
    const char *name;  /* CRuby's */
    const char *alias; /* RFC and JOSE spelling */
} md_names[MM_MD_COUNT] = {
    {"MD5", "MD5"},        {"SHA1", "SHA-1"},     {"SHA224", "SHA-224"},
    {"SHA256", "SHA-256"}, {"SHA384", "SHA-384"}, {"SHA512", "SHA-512"},
};

/* Fetched once per process: EVP_MD_fetch costs a lookup in the provider's
 * tables and a lock, which every hash of every request would pay with
 * libcrypto's implicit fetch. Never freed: they live as long as libcrypto. */
static EVP_MD *fetched[MM_MD_COUNT];

const EVP_MD *mm_crypto_md(mrb_state *mrb, mm_md_e which)
{
    EVP_MD *md = __atomic_load_n(&fetched[which], __ATOMIC_ACQUIRE), *none = NULL;

    if (md == NULL) {
        md = EVP_MD_fetch(NULL, md_names[which].name, NULL);
        if (md == NULL) {
            mm_crypto_raise(mrb, E_RUNTIME_ERROR, md_names[which].name);
        }
        if (!__atomic_compare_exchange_n(&fetched[which], &none, md, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            EVP_MD_free(md); /* another thread was first */
            md = none;
        }
    }
    return md;
}

const char *mm_crypto_md_name(mm_md_e which)
{
    return md_names[which].name;
}

int mm_crypto_md_of_class(mrb_state *mrb, struct RClass *c)
{
    mrb_value v;

    for (; c; c = c->super) {
        v = mrb_obj_iv_get(mrb, (struct RObject *)c, mrb_intern_lit(mrb, "mm_md"));
        if (mrb_fixnum_p(v)) {
            return (int)mrb_fixnum(v);
        }
    }
    return -1;
}

mm_md_e mm_crypto_md_arg(mrb_state *mrb, mrb_value name)
{
    int i;

    if (mrb_string_p(name)) {
        for (i = 0; i < MM_MD_COUNT; i++) {
            const char *s = RSTRING_PTR(name);
            size_t n = (size_t)RSTRING_LEN(name);

            if ((n == strlen(md_names[i].name) && strncasecmp(s, md_names[i].name, n) == 0) ||
                (n == strlen(md_names[i].alias) && strncasecmp(s, md_names[i].alias, n) == 0)) {
                return (mm_md_e)i;
            }
        }
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "unknown digest %!v (MD5, SHA1, SHA224, SHA256, SHA384, SHA512)",
                   name);
    }
    if (mrb_class_p(name) || mrb_type(name) == MRB_TT_DATA) {
        i = mm_crypto_md_of_class(mrb, mrb_class_p(name) ? mrb_class_ptr(name) : mrb_obj_class(mrb, name));
        if (i >= 0) {
            return (mm_md_e)i;
        }
    }
    mrb_raisef(mrb, E_TYPE_ERROR, "a digest is named by a String (\"SHA256\") or a Digest class, not %s",
               mrb_obj_classname(mrb, name));
    return MM_MD_SHA256; /* not reached */
}

unsigned int mm_crypto_digest(mrb_state *mrb, mm_md_e which, const void *data, size_t n, unsigned char *out)
{
    unsigned int len = 0;

    if (!EVP_Digest(data, n, out, &len, mm_crypto_md(mrb, which), NULL)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest failed");
    }
    return len;
}

mrb_value mm_crypto_hex(mrb_state *mrb, const unsigned char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    mrb_value s = mrb_str_new(mrb, NULL, (mrb_int)(n * 2));
    char *p = RSTRING_PTR(s);
    size_t i;

    for (i = 0; i < n; i++) {
        p[2 * i] = digits[bytes[i] >> 4];
        p[2 * i + 1] = digits[bytes[i] & 15];
    }
    return s;
}

mrb_value mm_crypto_base64(mrb_state *mrb, const unsigned char *bytes, size_t n)
{
    mrb_value s = mrb_str_new(mrb, NULL, (mrb_int)mm_base64_encoded_len(n, 0));

    mm_base64_encode(bytes, n, RSTRING_PTR(s), 0);
    return s;
}

mrb_value mm_crypto_formatted(mrb_state *mrb, mm_form_e form, const unsigned char *bytes, size_t n)
{
    switch (form) {
    case MM_AS_HEX:
        return mm_crypto_hex(mrb, bytes, n);
    case MM_AS_BASE64:
        return mm_crypto_base64(mrb, bytes, n);
    default:
        return mrb_str_new(mrb, (const char *)bytes, (mrb_int)n);
    }
}

void mm_crypto_raise(mrb_state *mrb, struct RClass *cls, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    char code[256];

    ERR_clear_error();
    if (e == 0) {
        mrb_raise(mrb, cls, what);
    }
    if (reason == NULL) {
        ERR_error_string_n(e, code, sizeof code);
        reason = code;
    }
    mrb_raisef(mrb, cls, "%s: %s", what, reason);
}

struct RClass *mm_crypto_error(mrb_state *mrb)
{
    return mrb_class_get_under(mrb, mrb_module_get(mrb, "OpenSSL"), "OpenSSLError");
}
