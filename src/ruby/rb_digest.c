/* rb_digest.c: Digest::MD5, SHA1, SHA256, SHA384 and SHA512 as CRuby has
 * them (digest, hexdigest, base64digest of a String; new, update, <<,
 * digest, finish ... for data that comes in pieces), computed by
 * libcrypto. Each object owns an EVP_MD_CTX, freed with the object. */

#include <string.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>
#include <mruby/variable.h>
#include <openssl/evp.h>

#include "binding.h"
#include "classes.h"
#include "crypto.h"

static void ctx_free(mrb_state *mrb, void *p)
{
    EVP_MD_CTX_free(p);
}

static const mrb_data_type digest_type = {"Digest", ctx_free};

/* The classes under Digest and their digests. */
static const struct {
    const char *name;
    mm_md_e md;
} classes[] = {
    {"MD5", MM_MD_MD5},       {"SHA1", MM_MD_SHA1},     {"SHA256", MM_MD_SHA256},
    {"SHA384", MM_MD_SHA384}, {"SHA512", MM_MD_SHA512},
};

static mm_md_e class_md(mrb_state *mrb, mrb_value klass)
{
    int md = mm_crypto_md_of_class(mrb, mrb_class_ptr(klass));

    if (md < 0) {
        mrb_raisef(mrb, E_NOTIMP_ERROR, "%s is an abstract class: use Digest::SHA256 and the others",
                   mrb_class_name(mrb, mrb_class_ptr(klass)));
    }
    return (mm_md_e)md;
}

static EVP_MD_CTX *ctx_of(mrb_state *mrb, mrb_value self)
{
    EVP_MD_CTX *ctx = mrb_data_check_get_ptr(mrb, self, &digest_type);

    if (ctx == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Digest object not initialized");
    }
    return ctx;
}

static void ctx_init(mrb_state *mrb, EVP_MD_CTX *ctx, mm_md_e md)
{
    if (!EVP_DigestInit_ex(ctx, mm_crypto_md(mrb, md), NULL)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest init failed");
    }
}

/* A new context for self, replacing any it has (initialize called twice). */
static EVP_MD_CTX *ctx_new(mrb_state *mrb, mrb_value self)
{
    EVP_MD_CTX *ctx = DATA_PTR(self);

    if (ctx) {
        EVP_MD_CTX_free(ctx);
        DATA_PTR(self) = NULL;
    }
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory for a digest");
    }
    mrb_data_init(self, ctx, &digest_type);
    return ctx;
}

/* Digest::SHA256.new(str = nil) */
static mrb_value digest_initialize(mrb_state *mrb, mrb_value self)
{
    mm_md_e md = class_md(mrb, mrb_obj_value(mrb_obj_class(mrb, self)));
    const char *data = NULL;
    mrb_int n = 0;
    EVP_MD_CTX *ctx;

    mrb_get_args(mrb, "|s!", &data, &n);
    ctx = ctx_new(mrb, self);
    ctx_init(mrb, ctx, md);
    if (data && !EVP_DigestUpdate(ctx, data, (size_t)n)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest update failed");
    }
    return self;
}

static mrb_value digest_initialize_copy(mrb_state *mrb, mrb_value self)
{
    mrb_value other;
    EVP_MD_CTX *ctx;

    mrb_get_args(mrb, "o", &other);
    if (mrb_obj_equal(mrb, self, other)) {
        return self;
    }
    if (mrb_obj_class(mrb, self) != mrb_obj_class(mrb, other)) {
        mrb_raise(mrb, E_TYPE_ERROR, "initialize_copy should take same class object");
    }
    ctx = ctx_new(mrb, self);
    if (!EVP_MD_CTX_copy_ex(ctx, ctx_of(mrb, other))) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest copy failed");
    }
    return self;
}

/* update(str), <<: returns self */
static mrb_value digest_update(mrb_state *mrb, mrb_value self)
{
    const char *data;
    mrb_int n;

    mrb_get_args(mrb, "s", &data, &n);
    if (!EVP_DigestUpdate(ctx_of(mrb, self), data, (size_t)n)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest update failed");
    }
    return self;
}

/* The value of the data so far, leaving the context as it is (the final
 * step runs on a copy); with reset, the context starts again. */
static unsigned int value(mrb_state *mrb, mrb_value self, unsigned char *out, int reset)
{
    EVP_MD_CTX *ctx = ctx_of(mrb, self), *copy = EVP_MD_CTX_new();
    unsigned int len = 0;
    int ok = copy && EVP_MD_CTX_copy_ex(copy, ctx) && EVP_DigestFinal_ex(copy, out, &len);

    EVP_MD_CTX_free(copy);
    if (!ok) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest failed");
    }
    if (reset && !EVP_DigestInit_ex(ctx, NULL, NULL)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest reset failed");
    }
    return len;
}

/* The value in the form the method's index names (mm_form_e). */
static mrb_value formatted(mrb_state *mrb, mm_form_e form, const unsigned char *out, unsigned int len)
{
    return mm_crypto_formatted(mrb, form, out, len);
}

/* digest, hexdigest, base64digest (str = nil): the value so far; given a
 * String, the value of that String alone, the object reset before and
 * after (CRuby's Digest::Instance). */
static mrb_value digest_value(mrb_state *mrb, mrb_value self, mm_form_e form)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    mrb_value str = mrb_nil_value();
    EVP_MD_CTX *ctx = ctx_of(mrb, self);

    mrb_get_args(mrb, "|S!", &str);
    if (mrb_nil_p(str)) {
        return formatted(mrb, form, out, value(mrb, self, out, 0));
    }
    if (!EVP_DigestInit_ex(ctx, NULL, NULL) || !EVP_DigestUpdate(ctx, RSTRING_PTR(str), RSTRING_LEN(str))) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest failed");
    }
    return formatted(mrb, form, out, value(mrb, self, out, 1));
}
MM_INDEXED_FUNCS8(digest_value);

/* digest!, hexdigest!, base64digest!, finish: the value, then reset. */
static mrb_value digest_value_bang(mrb_state *mrb, mrb_value self, mm_form_e form)
{
    unsigned char out[EVP_MAX_MD_SIZE];

    return formatted(mrb, form, out, value(mrb, self, out, 1));
}
MM_INDEXED_FUNCS8(digest_value_bang);

static mrb_value digest_reset(mrb_state *mrb, mrb_value self)
{
    if (!EVP_DigestInit_ex(ctx_of(mrb, self), NULL, NULL)) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "digest reset failed");
    }
    return self;
}

static mrb_value digest_length(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(EVP_MD_CTX_get_size(ctx_of(mrb, self)));
}

static mrb_value digest_block_length(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(EVP_MD_CTX_get_block_size(ctx_of(mrb, self)));
}

/* ==: another digest object's value, or a String of its hex (CRuby). */
static mrb_value digest_equal(mrb_state *mrb, mrb_value self)
{
    unsigned char a[EVP_MAX_MD_SIZE], b[EVP_MAX_MD_SIZE];
    unsigned int alen = value(mrb, self, a, 0), blen;
    mrb_value other, hex;

    mrb_get_args(mrb, "o", &other);
    if (mrb_string_p(other)) {
        hex = mm_crypto_hex(mrb, a, alen);
        return mrb_bool_value(mrb_str_equal(mrb, hex, other));
    }
    if (mrb_data_check_get_ptr(mrb, other, &digest_type) == NULL) {
        return mrb_false_value();
    }
    blen = value(mrb, other, b, 0);
    return mrb_bool_value(alen == blen && memcmp(a, b, alen) == 0);
}

static mrb_value digest_inspect(mrb_state *mrb, mrb_value self)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = value(mrb, self, out, 0);

    return mrb_format(mrb, "#<%s: %v>", mrb_obj_classname(mrb, self), mm_crypto_hex(mrb, out, len));
}

/* Digest::SHA256.digest(str), .hexdigest(str), .base64digest(str) */
static mrb_value class_value(mrb_state *mrb, mrb_value klass, mm_form_e form)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    mm_md_e md = class_md(mrb, klass);
    const char *data;
    mrb_int n;

    mrb_get_args(mrb, "s", &data, &n);
    return formatted(mrb, form, out, mm_crypto_digest(mrb, md, data, (size_t)n, out));
}
MM_INDEXED_FUNCS8(class_value);

/* Digest.hexencode(str) */
static mrb_value digest_hexencode(mrb_state *mrb, mrb_value self)
{
    const char *data;
    mrb_int n;

    mrb_get_args(mrb, "s", &data, &n);
    return mm_crypto_hex(mrb, (const unsigned char *)data, (size_t)n);
}

void mm_digest_init(mrb_state *mrb)
{
    struct RClass *digest = mrb_define_module(mrb, "Digest");
    struct RClass *base = mrb_define_class_under(mrb, digest, "Base", mrb->object_class);
    struct RClass *meta = mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(base)));
    static const char *const forms[] = {"digest", "hexdigest", "base64digest"};
    static const char *const bang_forms[] = {"digest!", "hexdigest!", "base64digest!"};
    size_t i;

    MRB_SET_INSTANCE_TT(base, MRB_TT_DATA);
    mrb_define_module_function(mrb, digest, "hexencode", digest_hexencode, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "initialize", digest_initialize, MRB_ARGS_OPT(1));
    mrb_define_method(mrb, base, "initialize_copy", digest_initialize_copy, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "update", digest_update, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "<<", digest_update, MRB_ARGS_REQ(1));
    for (i = 0; i < 3; i++) {
        mrb_define_method(mrb, base, forms[i], digest_value_at[i], MRB_ARGS_ANY());
        mrb_define_method(mrb, base, bang_forms[i], digest_value_bang_at[i], MRB_ARGS_ANY());
        mrb_define_method(mrb, meta, forms[i], class_value_at[i], MRB_ARGS_ANY());
    }
    mrb_define_method(mrb, base, "finish", digest_value_bang_at[MM_AS_BINARY], MRB_ARGS_ANY());
    mrb_define_method(mrb, base, "to_s", digest_value_at[MM_AS_HEX], MRB_ARGS_ANY());
    mrb_define_method(mrb, base, "reset", digest_reset, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "digest_length", digest_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "length", digest_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "size", digest_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "block_length", digest_block_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "==", digest_equal, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "inspect", digest_inspect, MRB_ARGS_NONE());
    for (i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        struct RClass *c = mrb_define_class_under(mrb, digest, classes[i].name, base);

        mrb_obj_iv_set(mrb, (struct RObject *)c, mrb_intern_lit(mrb, "mm_md"),
                       mrb_fixnum_value(classes[i].md));
    }
}
