/* rb_openssl.c: the OpenSSL module's functions that need no key object:
 * OpenSSL::HMAC.digest/hexdigest/base64digest(name, key, data) and
 * OpenSSL.fixed_length_secure_compare/secure_compare, as CRuby's openssl
 * has them, computed by libcrypto; and OpenSSL::OpenSSLError, the base of
 * the module's errors. */

#include <limits.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/string.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "binding.h"
#include "classes.h"
#include "crypto.h"

/* OpenSSL::HMAC.digest(name, key, data), .hexdigest, .base64digest: name
 * is a digest's name ("SHA256") or a Digest class. */
static mrb_value hmac_value(mrb_state *mrb, mrb_value self, mm_form_e form)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    mrb_value name;
    const char *key, *data;
    mrb_int key_len, data_len;
    const EVP_MD *md;

    mrb_get_args(mrb, "oss", &name, &key, &key_len, &data, &data_len);
    md = mm_crypto_md(mrb, mm_crypto_md_arg(mrb, name));
    if (key_len > INT_MAX) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "an HMAC key of 2 GB or more");
    }
    if (HMAC(md, key, (int)key_len, (const unsigned char *)data, (size_t)data_len, out, &len) == NULL) {
        mm_crypto_raise(mrb, mm_crypto_error(mrb), "HMAC failed");
    }
    return mm_crypto_formatted(mrb, form, out, len);
}
MM_INDEXED_FUNCS8(hmac_value);

/* OpenSSL.fixed_length_secure_compare(a, b): whether two Strings of the
 * same length are equal, in a time that depends on their length only
 * (CRYPTO_memcmp); ArgumentError for different lengths, as in CRuby. */
static mrb_value fixed_length_secure_compare(mrb_state *mrb, mrb_value self)
{
    const char *a, *b;
    mrb_int alen, blen;

    mrb_get_args(mrb, "ss", &a, &alen, &b, &blen);
    if (alen != blen) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "inputs must be of equal length");
    }
    return mrb_bool_value(CRYPTO_memcmp(a, b, (size_t)alen) == 0);
}

/* OpenSSL.secure_compare(a, b): whether two Strings are equal, comparing
 * their SHA-256 digests in constant time first, as CRuby does, so that the
 * time says nothing about where they differ nor whether their lengths do. */
static mrb_value secure_compare(mrb_state *mrb, mrb_value self)
{
    unsigned char da[EVP_MAX_MD_SIZE], db[EVP_MAX_MD_SIZE];
    const char *a, *b;
    mrb_int alen, blen;
    unsigned int n;
    int same;

    mrb_get_args(mrb, "ss", &a, &alen, &b, &blen);
    n = mm_crypto_digest(mrb, MM_MD_SHA256, a, (size_t)alen, da);
    mm_crypto_digest(mrb, MM_MD_SHA256, b, (size_t)blen, db);
    same = CRYPTO_memcmp(da, db, n) == 0;
    /* equal digests: the lengths are equal but for a collision of SHA-256 */
    return mrb_bool_value(same && alen == blen && CRYPTO_memcmp(a, b, (size_t)alen) == 0);
}

void mm_openssl_init(mrb_state *mrb)
{
    struct RClass *openssl = mrb_define_module(mrb, "OpenSSL");
    struct RClass *hmac = mrb_define_class_under(mrb, openssl, "HMAC", mrb->object_class);
    struct RClass *meta = mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(hmac)));
    struct RClass *error = mrb_define_class_under(mrb, openssl, "OpenSSLError", mrb->eStandardError_class);

    mrb_define_class_under(mrb, hmac, "HMACError", error);
    mrb_define_method(mrb, meta, "digest", hmac_value_at[MM_AS_BINARY], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "hexdigest", hmac_value_at[MM_AS_HEX], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "base64digest", hmac_value_at[MM_AS_BASE64], MRB_ARGS_ANY());
    mrb_define_module_function(mrb, openssl, "fixed_length_secure_compare", fixed_length_secure_compare,
                               MRB_ARGS_REQ(2));
    mrb_define_module_function(mrb, openssl, "secure_compare", secure_compare, MRB_ARGS_REQ(2));
}
