// ostack's Secret Service schema and the few helpers Swift needs around libsecret's
// non-variadic calls: the SecretSchema must be a static C struct, GHashTable construction and
// GError classification use GLib macros (quarks, type checks) that Swift cannot call.
#ifndef OSTACK_CSECRETSHIMS_H
#define OSTACK_CSECRETSHIMS_H
#include <libsecret/secret.h>

/// The schema of every ostack item (docs/keyring.md, "Schema"): name "io.ostack.Secret", flag
/// SECRET_SCHEMA_DONT_MATCH_NAME, string attributes app, namespace, account, kind, version.
const SecretSchema *csecret_schema(void);

/// Builds an attribute table; NULL arguments are left out (a search on app + namespace passes
/// NULL for account, kind and version). Free with g_hash_table_unref.
GHashTable *csecret_attributes(const char *app, const char *namespace_, const char *account, const char *kind,
                               const char *version);

/// Copies one attribute of a search result (NULL when absent). Free with g_free.
char *csecret_item_attribute(gpointer item, const char *name);

/// Whether a search result is a locked item.
gboolean csecret_item_is_locked(gpointer item);

/// A binary secret value (content type application/octet-stream). libsecret copies the bytes.
/// Replaces the secret of an existing item in place (Item.SetSecret), keeping its label and
/// attributes. FALSE with *error set on failure, FALSE without one when `item` is not an item.
gboolean csecret_item_set_secret(gpointer item, SecretValue *value, GCancellable *cancellable, GError **error);

SecretValue *csecret_value_new(const unsigned char *bytes, gsize length);

/// Outcome classes for a GError (see csecret_classify).
enum {
    CSECRET_ERROR_OTHER = 0,
    CSECRET_ERROR_LOCKED = 1,
    CSECRET_ERROR_NO_SERVICE = 2,
    CSECRET_ERROR_TIMEOUT = 3,
    CSECRET_ERROR_DENIED = 4,
    /// The transfer session failed in a way a new session fixes: KWallet dropped it ("Can't find
    /// session …", org.qtproject.QtDBus.Error.InvalidObjectPath) or refused a short DH public key.
    CSECRET_ERROR_STALE_SESSION = 5,
};

/// Forgets libsecret's cached service proxy and transfer session, so the next call opens new ones.
void csecret_reset_service(void);

/// Classifies a GError from libsecret / GDBus into one of the CSECRET_ERROR_* values.
int csecret_classify(const GError *error);

/// Whether `error` says the item (or other object) addressed no longer exists: GDBus's
/// UNKNOWN_OBJECT, its remote name org.freedesktop.DBus.Error.UnknownObject, or libsecret's
/// NO_SUCH_OBJECT. KeePassXC answers so to SetSecret on an item deleted since it was found.
int csecret_error_is_gone(const GError *error);

/// States of the default collection (csecret_default_collection_state).
enum {
    CSECRET_COLLECTION_UNLOCKED = 0,
    CSECRET_COLLECTION_LOCKED = 1,
    CSECRET_COLLECTION_MISSING = 2,
};

/// Whether the default collection is unlocked, locked or missing (no `default` alias: the login
/// keyring is not loaded, the password manager's database is closed), or -1 with *error set.
int csecret_default_collection_state(GCancellable *cancellable, GError **error);

/// The process name (/proc/PID/comm) of the owner of org.freedesktop.secrets, asked of the bus
/// daemon with a 1 s timeout (never of the provider itself). 0 on success, -1 otherwise.
int csecret_provider_process(char *out, gsize size);

/// Cancels `cancellable` after `milliseconds` from a private thread. Returns a handle to stop the
/// timer with csecret_deadline_stop (always call it). g_cancellable_cancel is thread-safe.
gpointer csecret_deadline_start(GCancellable *cancellable, unsigned int milliseconds);
void csecret_deadline_stop(gpointer deadline);

/// The text the process writes to stderr before it ends itself (`_exit(10)`) when a call is still
/// running 10 s after its deadline cancelled it: a provider that crashed can leave libsecret waiting
/// on nothing, the cancellable ignored. NULL (the default) waits instead.
void csecret_set_hang_report(const char *text);

#endif
