#include "CSecretShims.h"
#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

static const SecretSchema ostack_schema = {
    "io.ostack.Secret",
    SECRET_SCHEMA_DONT_MATCH_NAME,
    {
        {"app", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"namespace", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"account", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"kind", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"version", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {NULL, 0},
    },
};

const SecretSchema *csecret_schema(void) { return &ostack_schema; }

GHashTable *csecret_attributes(const char *app, const char *namespace_, const char *account, const char *kind,
                               const char *version) {
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (app) g_hash_table_insert(table, g_strdup("app"), g_strdup(app));
    if (namespace_) g_hash_table_insert(table, g_strdup("namespace"), g_strdup(namespace_));
    if (account) g_hash_table_insert(table, g_strdup("account"), g_strdup(account));
    if (kind) g_hash_table_insert(table, g_strdup("kind"), g_strdup(kind));
    if (version) g_hash_table_insert(table, g_strdup("version"), g_strdup(version));
    return table;
}

char *csecret_item_attribute(gpointer item, const char *name) {
    if (!SECRET_IS_ITEM(item)) return NULL;
    GHashTable *attributes = secret_item_get_attributes(SECRET_ITEM(item));
    if (!attributes) return NULL;
    const char *value = g_hash_table_lookup(attributes, name);
    char *copy = value ? g_strdup(value) : NULL;
    g_hash_table_unref(attributes);
    return copy;
}

gboolean csecret_item_is_locked(gpointer item) {
    return SECRET_IS_ITEM(item) ? secret_item_get_locked(SECRET_ITEM(item)) : FALSE;
}

gboolean csecret_item_set_secret(gpointer item, SecretValue *value, GCancellable *cancellable, GError **error) {
    if (!SECRET_IS_ITEM(item)) return FALSE;
    return secret_item_set_secret_sync(SECRET_ITEM(item), value, cancellable, error);
}

SecretValue *csecret_value_new(const unsigned char *bytes, gsize length) {
    return secret_value_new((const gchar *)bytes, (gssize)length, "application/octet-stream");
}

void csecret_reset_service(void) {
    secret_service_disconnect();
}

int csecret_error_is_gone(const GError *error) {
    if (!error) return 0;
    if (g_error_matches(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT)) return 1;
    if (error->domain == SECRET_ERROR && error->code == SECRET_ERROR_NO_SUCH_OBJECT) return 1;
    int gone = 0;
    if (g_dbus_error_is_remote_error(error)) {
        gchar *name = g_dbus_error_get_remote_error(error);
        if (name && (strcmp(name, "org.freedesktop.DBus.Error.UnknownObject") == 0 ||
                     strcmp(name, "org.freedesktop.Secret.Error.NoSuchObject") == 0))
            gone = 1;
        g_free(name);
    }
    return gone;
}

int csecret_classify(const GError *error) {
    if (!error) return CSECRET_ERROR_OTHER;
    if (error->domain == SECRET_ERROR && error->code == SECRET_ERROR_IS_LOCKED) return CSECRET_ERROR_LOCKED;
    if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) return CSECRET_ERROR_TIMEOUT;
    if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) return CSECRET_ERROR_TIMEOUT;
    // libsecret strips the remote error name, so two KWallet transfer-session failures are known only
    // by their message (matched here, never shown): a secret kwalletd could not decrypt because it
    // derived a different session key ("Can't find session …"), and an OpenSession refused because
    // libsecret sent its DH public key without leading zero bytes (about one key in 256; KWallet
    // wants exactly 128 bytes). A new session fixes both (docs/keyring.md).
    if (error->message && (strstr(error->message, "Can't find session") != NULL ||
                           strstr(error->message, "Client public key size is invalid") != NULL))
        return CSECRET_ERROR_STALE_SESSION;
    if (g_dbus_error_is_remote_error(error)) {
        gchar *name = g_dbus_error_get_remote_error(error);
        int result = CSECRET_ERROR_OTHER;
        if (name) {
            if (strcmp(name, "org.freedesktop.Secret.Error.IsLocked") == 0) result = CSECRET_ERROR_LOCKED;
            else if (strcmp(name, "org.qtproject.QtDBus.Error.InvalidObjectPath") == 0)
                result = CSECRET_ERROR_STALE_SESSION;
            else if (strcmp(name, "org.freedesktop.DBus.Error.ServiceUnknown") == 0 ||
                     strcmp(name, "org.freedesktop.DBus.Error.NameHasNoOwner") == 0 ||
                     strcmp(name, "org.freedesktop.DBus.Error.Spawn.ChildExited") == 0 ||
                     strcmp(name, "org.freedesktop.DBus.Error.UnknownMethod") == 0)
                result = CSECRET_ERROR_NO_SERVICE;
            else if (strcmp(name, "org.freedesktop.DBus.Error.NoReply") == 0 ||
                     strcmp(name, "org.freedesktop.DBus.Error.Timeout") == 0)
                result = CSECRET_ERROR_TIMEOUT;
            else if (strcmp(name, "org.freedesktop.DBus.Error.AccessDenied") == 0 ||
                     strcmp(name, "org.freedesktop.Secret.Error.IsLocked") == 0)
                result = CSECRET_ERROR_DENIED;
            g_free(name);
        }
        return result;
    }
    if (error->domain == G_DBUS_ERROR) {
        switch (error->code) {
        case G_DBUS_ERROR_NO_REPLY:
        case G_DBUS_ERROR_TIMEOUT: return CSECRET_ERROR_TIMEOUT;
        case G_DBUS_ERROR_ACCESS_DENIED: return CSECRET_ERROR_DENIED;
        default: return CSECRET_ERROR_NO_SERVICE;
        }
    }
    // Connecting to the session bus failed (no address, socket missing, autolaunch impossible).
    if (error->domain == G_IO_ERROR || error->domain == G_SPAWN_ERROR) return CSECRET_ERROR_NO_SERVICE;
    return CSECRET_ERROR_OTHER;
}

int csecret_default_collection_state(GCancellable *cancellable, GError **error) {
    SecretService *service = secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, error);
    if (!service) return -1;
    SecretCollection *collection =
        secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT, SECRET_COLLECTION_NONE, cancellable, error);
    g_object_unref(service);
    if (!collection) {
        if (error && *error) return -1;
        return CSECRET_COLLECTION_MISSING;  // no default alias: the keyring is not loaded, or closed
    }
    gboolean locked = secret_collection_get_locked(collection);
    g_object_unref(collection);
    return locked ? CSECRET_COLLECTION_LOCKED : CSECRET_COLLECTION_UNLOCKED;
}

int csecret_provider_process(char *out, gsize size) {
    if (!out || size == 0) return -1;
    out[0] = '\0';
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!bus) {
        g_clear_error(&error);
        return -1;
    }
    // Asks the bus daemon (never the keyring provider, which may be hung) who owns the name.
    GVariant *reply = g_dbus_connection_call_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID",
        g_variant_new("(s)", "org.freedesktop.secrets"), G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, 1000,
        NULL, &error);
    g_object_unref(bus);
    if (!reply) {
        g_clear_error(&error);
        return -1;
    }
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    gchar path[64];
    g_snprintf(path, sizeof path, "/proc/%u/comm", pid);
    gchar *contents = NULL;
    if (!g_file_get_contents(path, &contents, NULL, NULL)) return -1;
    g_strchomp(contents);
    g_strlcpy(out, contents, size);
    g_free(contents);
    return 0;
}

typedef struct {
    GCancellable *cancellable;
    GMutex mutex;
    GCond cond;
    gboolean stopped;
    guint64 deadline_us;
    GThread *thread;
} Deadline;

/* What the process says before it ends itself when a call outlives its deadline by the grace
 * (csecret_set_hang_report); NULL: it waits for the call, however long. */
static char *hang_report = NULL;
static const guint64 hang_grace_us = 10 * G_USEC_PER_SEC;

void csecret_set_hang_report(const char *text) {
    char *copy = text ? g_strdup(text) : NULL;
    char *old = g_atomic_pointer_exchange(&hang_report, copy);
    g_free(old);
}

static gpointer deadline_run(gpointer data) {
    Deadline *d = data;
    g_mutex_lock(&d->mutex);
    gboolean cancelled = FALSE;
    while (!d->stopped) {
        if (!cancelled) {
            if (!g_cond_wait_until(&d->cond, &d->mutex, (gint64)d->deadline_us)) {
                if (!d->stopped) g_cancellable_cancel(d->cancellable);
                cancelled = TRUE;
            }
            continue;
        }
        /* Cancelled: a call that honours the cancellable returns at once. One that does not (libsecret
         * stuck after its provider crashed) would hold the process forever: after the grace the
         * process says so and ends, as if killed (everything ostack writes survives a kill -9). */
        if (!g_cond_wait_until(&d->cond, &d->mutex, (gint64)(d->deadline_us + hang_grace_us))) {
            const char *report = g_atomic_pointer_get(&hang_report);
            if (!d->stopped && report != NULL) {
                size_t left = strlen(report);
                const char *at = report;
                while (left > 0) {
                    ssize_t n = write(2, at, left);
                    if (n <= 0) break;
                    at += n;
                    left -= (size_t)n;
                }
                _exit(10);
            }
            break;
        }
    }
    g_mutex_unlock(&d->mutex);
    return NULL;
}

gpointer csecret_deadline_start(GCancellable *cancellable, unsigned int milliseconds) {
    Deadline *d = g_new0(Deadline, 1);
    d->cancellable = g_object_ref(cancellable);
    g_mutex_init(&d->mutex);
    g_cond_init(&d->cond);
    d->deadline_us = (guint64)g_get_monotonic_time() + (guint64)milliseconds * 1000;
    d->thread = g_thread_new("ostack-keyring-deadline", deadline_run, d);
    return d;
}

void csecret_deadline_stop(gpointer deadline) {
    Deadline *d = deadline;
    g_mutex_lock(&d->mutex);
    d->stopped = TRUE;
    g_cond_signal(&d->cond);
    g_mutex_unlock(&d->mutex);
    g_thread_join(d->thread);
    g_object_unref(d->cancellable);
    g_mutex_clear(&d->mutex);
    g_cond_clear(&d->cond);
    g_free(d);
}
