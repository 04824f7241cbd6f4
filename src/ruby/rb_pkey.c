/* rb_pkey.c: OpenSSL::PKey, public keys to verify signatures with:
 * OpenSSL::PKey.read (PEM or DER) and the RSA and EC classes' new, as in
 * CRuby; PKey#verify (CRuby's form); and mod_mruby's own
 * OpenSSL::PKey.from_jwk and PKey#verify_jws for JWTs. Each object owns
 * an EVP_PKEY (a reference: dup shares it), freed with the object. Keys
 * are parsed when made: a script keeps them (a constant) and reuses them. */

#include <string.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <openssl/pem.h>

#include "classes.h"
#include "crypto.h"
#include "pkey.h"

static void pkey_free(mrb_state *mrb, void *p)
{
    EVP_PKEY_free(p);
}

static const mrb_data_type pkey_type = {"OpenSSL::PKey", pkey_free};

static struct RClass *pkey_module(mrb_state *mrb)
{
    return mrb_module_get_under(mrb, mrb_module_get(mrb, "OpenSSL"), "PKey");
}

static struct RClass *pkey_error(mrb_state *mrb)
{
    return mrb_class_get_under(mrb, pkey_module(mrb), "PKeyError");
}

static EVP_PKEY *key_of(mrb_state *mrb, mrb_value self)
{
    EVP_PKEY *key = mrb_data_check_get_ptr(mrb, self, &pkey_type);

    if (key == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "OpenSSL::PKey object not initialized");
    }
    return key;
}

/* The class of PKey for the key's type: RSA, EC, else PKey (Ed25519). */
static struct RClass *class_for(mrb_state *mrb, EVP_PKEY *key)
{
    const char *name = EVP_PKEY_is_a(key, "RSA") ? "RSA" : EVP_PKEY_is_a(key, "EC") ? "EC" : "PKey";

    return mrb_class_get_under(mrb, pkey_module(mrb), name);
}

/* A new object owning key (freed here if the allocation raises). */
static mrb_value wrap(mrb_state *mrb, EVP_PKEY *key)
{
    struct RData *d = mrb_data_object_alloc(mrb, class_for(mrb, key), NULL, &pkey_type);

    d->data = key;
    return mrb_obj_value(d);
}

static EVP_PKEY *read_arg(mrb_state *mrb, mrb_value text)
{
    const char *why;
    EVP_PKEY *key = mm_pkey_read(RSTRING_PTR(text), (size_t)RSTRING_LEN(text), &why);

    if (key == NULL) {
        mrb_raisef(mrb, pkey_error(mrb), "Could not parse PKey: %s", why);
    }
    return key;
}

/* OpenSSL::PKey.read(text): an RSA, EC or (Ed25519, Ed448) PKey. */
static mrb_value pkey_read(mrb_state *mrb, mrb_value self)
{
    mrb_value text;

    mrb_get_args(mrb, "S", &text);
    return wrap(mrb, read_arg(mrb, text));
}

/* OpenSSL::PKey::RSA.new(text), EC.new(text), PKey.new(text): the same,
 * refusing a key of another type than the class's. */
static mrb_value pkey_initialize(mrb_state *mrb, mrb_value self)
{
    mrb_value text;
    EVP_PKEY *key;
    struct RClass *want;

    mrb_get_args(mrb, "S", &text);
    key = read_arg(mrb, text);
    want = class_for(mrb, key);
    if (want != mrb_class_get_under(mrb, pkey_module(mrb), "PKey") && !mrb_obj_is_kind_of(mrb, self, want)) {
        EVP_PKEY_free(key);
        mrb_raisef(mrb, pkey_error(mrb), "not a key of %s, but of %s", mrb_obj_classname(mrb, self),
                   mrb_class_name(mrb, want));
    }
    if (DATA_PTR(self)) {
        EVP_PKEY_free(DATA_PTR(self));
    }
    mrb_data_init(self, key, &pkey_type);
    return self;
}

static mrb_value pkey_initialize_copy(mrb_state *mrb, mrb_value self)
{
    mrb_value other;
    EVP_PKEY *key;

    mrb_get_args(mrb, "o", &other);
    key = key_of(mrb, other);
    if (mrb_obj_equal(mrb, self, other)) {
        return self;
    }
    EVP_PKEY_up_ref(key); /* keys do not change: the copy shares it */
    if (DATA_PTR(self)) {
        EVP_PKEY_free(DATA_PTR(self));
    }
    mrb_data_init(self, key, &pkey_type);
    return self;
}

/* One field of the JWK Hash, by a String key or a Symbol one (JSON.parse
 * with symbolize_names); TypeError for a value that is not a String. */
static mm_jwk_field_t jwk_field(mrb_state *mrb, mrb_value jwk, const char *name)
{
    mm_jwk_field_t f = {NULL, 0};
    mrb_value v = mrb_hash_fetch(mrb, jwk, mrb_str_new_cstr(mrb, name), mrb_undef_value());

    if (mrb_undef_p(v)) {
        v = mrb_hash_fetch(mrb, jwk, mrb_symbol_value(mrb_intern_cstr(mrb, name)), mrb_nil_value());
    }
    if (mrb_nil_p(v)) {
        return f;
    }
    if (!mrb_string_p(v)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "a JWK's \"%s\" must be a String, not %s", name,
                   mrb_obj_classname(mrb, v));
    }
    f.p = RSTRING_PTR(v);
    f.n = (size_t)RSTRING_LEN(v);
    return f;
}

/* OpenSSL::PKey.from_jwk(hash): the public key of a JWK, as JSON.parse
 * reads it (RFC 7517). */
static mrb_value pkey_from_jwk(mrb_state *mrb, mrb_value self)
{
    mrb_value hash;
    mm_jwk_t jwk;
    const char *why;
    EVP_PKEY *key;

    mrb_get_args(mrb, "H", &hash);
    jwk.kty = jwk_field(mrb, hash, "kty");
    jwk.crv = jwk_field(mrb, hash, "crv");
    jwk.n = jwk_field(mrb, hash, "n");
    jwk.e = jwk_field(mrb, hash, "e");
    jwk.x = jwk_field(mrb, hash, "x");
    jwk.y = jwk_field(mrb, hash, "y");
    /* from here on nothing runs Ruby: the fields' Strings stay as they are */
    key = mm_pkey_from_jwk(&jwk, &why);
    if (key == NULL) {
        mrb_raisef(mrb, pkey_error(mrb), "Could not make a key of the JWK: %s", why);
    }
    return wrap(mrb, key);
}

/* key.verify(digest, signature, data): CRuby's form; digest nil for EdDSA. */
static mrb_value pkey_verify(mrb_state *mrb, mrb_value self)
{
    mrb_value digest;
    const char *sig, *data;
    mrb_int sig_len, data_len;
    const EVP_MD *md = NULL;

    mrb_get_args(mrb, "oss", &digest, &sig, &sig_len, &data, &data_len);
    if (!mrb_nil_p(digest)) {
        md = mm_crypto_md(mrb, mm_crypto_md_arg(mrb, digest));
    }
    return mrb_bool_value(mm_pkey_verify(key_of(mrb, self), md, (const unsigned char *)sig, (size_t)sig_len,
                                         (const unsigned char *)data, (size_t)data_len));
}

/* key.verify_jws(alg, signature, signing_input): whether signature (the
 * third part of a JWS, decoded) signs signing_input (its first two parts
 * and the dot) by alg with this key. PKeyError when alg does not go with
 * the key. */
static mrb_value pkey_verify_jws(mrb_state *mrb, mrb_value self)
{
    const char *alg, *sig, *data, *why;
    mrb_int sig_len, data_len;
    int ok;

    mrb_get_args(mrb, "zss", &alg, &sig, &sig_len, &data, &data_len);
    ok = mm_pkey_verify_jws(key_of(mrb, self), alg, (const unsigned char *)sig, (size_t)sig_len,
                            (const unsigned char *)data, (size_t)data_len, &why);
    if (ok < 0) {
        mrb_raisef(mrb, pkey_error(mrb), "%s with this %s key: %s", alg,
                   EVP_PKEY_get0_type_name(key_of(mrb, self)), why);
    }
    return mrb_bool_value(ok);
}

/* key.oid: the key's type as CRuby names it ("rsaEncryption", "id-ecPublicKey", "ED25519"). */
static mrb_value pkey_oid(mrb_state *mrb, mrb_value self)
{
    EVP_PKEY *key = key_of(mrb, self);
    const char *name = EVP_PKEY_is_a(key, "RSA")  ? "rsaEncryption"
                       : EVP_PKEY_is_a(key, "EC") ? "id-ecPublicKey"
                                                  : EVP_PKEY_get0_type_name(key);

    return mrb_str_new_cstr(mrb, name ? name : "unknown");
}

/* key.public_to_pem: the public key as PEM (SubjectPublicKeyInfo). */
static mrb_value pkey_public_to_pem(mrb_state *mrb, mrb_value self)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *p;
    long n;
    mrb_value out;

    if (bio == NULL || !PEM_write_bio_PUBKEY(bio, key_of(mrb, self))) {
        BIO_free(bio);
        mm_crypto_raise(mrb, pkey_error(mrb), "PEM_write_bio_PUBKEY");
    }
    n = BIO_get_mem_data(bio, &p);
    out = mrb_str_new(mrb, p, n); /* NoMemoryError would leak the BIO: a few KB, once */
    BIO_free(bio);
    return out;
}

static mrb_value pkey_bits(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(EVP_PKEY_get_bits(key_of(mrb, self)));
}

void mm_pkey_init(mrb_state *mrb)
{
    struct RClass *openssl = mrb_module_get(mrb, "OpenSSL");
    struct RClass *mod = mrb_define_module_under(mrb, openssl, "PKey");
    struct RClass *base = mrb_define_class_under(mrb, mod, "PKey", mrb->object_class);

    MRB_SET_INSTANCE_TT(base, MRB_TT_DATA);
    mrb_define_class_under(mrb, mod, "PKeyError", mm_crypto_error(mrb));
    mrb_define_class_under(mrb, mod, "RSA", base);
    mrb_define_class_under(mrb, mod, "EC", base);
    mrb_define_module_function(mrb, mod, "read", pkey_read, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, mod, "from_jwk", pkey_from_jwk, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "initialize", pkey_initialize, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "initialize_copy", pkey_initialize_copy, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, base, "verify", pkey_verify, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, base, "verify_jws", pkey_verify_jws, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, base, "oid", pkey_oid, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "bits", pkey_bits, MRB_ARGS_NONE());
    mrb_define_method(mrb, base, "public_to_pem", pkey_public_to_pem, MRB_ARGS_NONE());
}
