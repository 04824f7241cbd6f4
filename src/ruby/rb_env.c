/* rb_env.c: ENV, a read-only view of httpd's process environment (what
 * the environment of apache2 held when it started, as envvars and
 * systemd set it), and Process.pid, which the original mod_mruby offered.
 *
 * Read-only because every thread of a child shares the environment and
 * setenv is not safe while other threads read it; a request's own
 * variables are r.subprocess_env (Apache::Env). */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "classes.h"

extern char **environ;

/* The name as a C string; ArgumentError for a NUL in it, as CRuby. */
static const char *name_arg(mrb_state *mrb, mrb_value name)
{
    if (memchr(RSTRING_PTR(name), '\0', RSTRING_LEN(name))) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "bad environment variable name: contains null byte");
    }
    return RSTRING_CSTR(mrb, name);
}

/* ENV[name]: the value, or nil. */
static mrb_value env_get(mrb_state *mrb, mrb_value self)
{
    mrb_value name;
    const char *v;

    mrb_get_args(mrb, "S", &name);
    v = getenv(name_arg(mrb, name));
    return v ? mrb_str_new_cstr(mrb, v) : mrb_nil_value();
}

/* ENV.fetch(name), fetch(name, default), fetch(name) { |name| ... }:
 * KeyError when it is not set and neither is given. */
static mrb_value env_fetch(mrb_state *mrb, mrb_value self)
{
    mrb_value name, dflt = mrb_undef_value(), block = mrb_nil_value();
    const char *v;

    mrb_get_args(mrb, "S|o&", &name, &dflt, &block);
    v = getenv(name_arg(mrb, name));
    if (v) {
        return mrb_str_new_cstr(mrb, v);
    }
    if (!mrb_nil_p(block)) {
        return mrb_yield(mrb, block, name);
    }
    if (mrb_undef_p(dflt)) {
        mrb_raisef(mrb, E_KEY_ERROR, "key not found: %!v", name);
    }
    return dflt;
}

static mrb_value env_key_p(mrb_state *mrb, mrb_value self)
{
    mrb_value name;

    mrb_get_args(mrb, "S", &name);
    return mrb_bool_value(getenv(name_arg(mrb, name)) != NULL);
}

/* ENV.to_h: a new Hash of every variable (a copy: changing it changes
 * nothing). The other readers are made from it. */
static mrb_value env_to_h(mrb_state *mrb, mrb_value self)
{
    mrb_value h = mrb_hash_new(mrb);
    int ai = mrb_gc_arena_save(mrb);
    char **e;

    for (e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');

        if (eq == NULL) {
            continue;
        }
        mrb_hash_set(mrb, h, mrb_str_new(mrb, *e, eq - *e), mrb_str_new_cstr(mrb, eq + 1));
        mrb_gc_arena_restore(mrb, ai);
    }
    return h;
}

static mrb_value env_keys(mrb_state *mrb, mrb_value self)
{
    return mrb_hash_keys(mrb, env_to_h(mrb, self));
}

static mrb_value env_values(mrb_state *mrb, mrb_value self)
{
    return mrb_hash_values(mrb, env_to_h(mrb, self));
}

static mrb_value env_size(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(mrb_hash_size(mrb, env_to_h(mrb, self)));
}

static mrb_value env_empty_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(environ == NULL || environ[0] == NULL);
}

/* ENV.each, each_pair: yields name and value; returns ENV. */
static mrb_value env_each(mrb_state *mrb, mrb_value self)
{
    mrb_value block, h, keys;
    mrb_int i;

    mrb_get_args(mrb, "&!", &block);
    h = env_to_h(mrb, self);
    keys = mrb_hash_keys(mrb, h);
    for (i = 0; i < RARRAY_LEN(keys); i++) {
        mrb_value pair[2];

        pair[0] = RARRAY_PTR(keys)[i];
        pair[1] = mrb_hash_get(mrb, h, pair[0]);
        mrb_yield_argv(mrb, block, 2, pair);
    }
    return self;
}

static mrb_value env_inspect(mrb_state *mrb, mrb_value self)
{
    return mrb_inspect(mrb, env_to_h(mrb, self));
}

static mrb_value env_to_s(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_lit(mrb, "ENV");
}

static mrb_value env_read_only(mrb_state *mrb, mrb_value self)
{
    mrb_raise(mrb, E_FROZEN_ERROR,
              "ENV is read-only in mod_mruby: httpd's threads share it (a request's variables are "
              "r.subprocess_env)");
    return mrb_nil_value();
}

/* Process.pid: the process running the script (each child's own). */
static mrb_value process_pid(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value((mrb_int)getpid());
}

void mm_env_init(mrb_state *mrb)
{
    static const char *const writers[] = {"[]=", "store", "delete", "clear", "update", "merge!", "replace"};
    mrb_value env = mrb_obj_new(mrb, mrb->object_class, 0, NULL);
    struct RClass *e = mrb_class_ptr(mrb_singleton_class(mrb, env));
    struct RClass *process = mrb_define_module(mrb, "Process");
    size_t i;

    mrb_define_method(mrb, e, "[]", env_get, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, e, "fetch", env_fetch, MRB_ARGS_ARG(1, 1) | MRB_ARGS_BLOCK());
    mrb_define_method(mrb, e, "key?", env_key_p, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, e, "has_key?", env_key_p, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, e, "include?", env_key_p, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, e, "member?", env_key_p, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, e, "to_h", env_to_h, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "to_hash", env_to_h, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "keys", env_keys, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "values", env_values, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "size", env_size, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "length", env_size, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "empty?", env_empty_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "each", env_each, MRB_ARGS_BLOCK());
    mrb_define_method(mrb, e, "each_pair", env_each, MRB_ARGS_BLOCK());
    mrb_define_method(mrb, e, "inspect", env_inspect, MRB_ARGS_NONE());
    mrb_define_method(mrb, e, "to_s", env_to_s, MRB_ARGS_NONE());
    for (i = 0; i < sizeof writers / sizeof writers[0]; i++) {
        mrb_define_method(mrb, e, writers[i], env_read_only, MRB_ARGS_ANY());
    }
    mrb_obj_freeze(mrb, env);
    mrb_define_global_const(mrb, "ENV", env);
    mrb_define_module_function(mrb, process, "pid", process_pid, MRB_ARGS_NONE());
}
