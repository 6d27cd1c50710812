import CSecretShims
import Testing

@testable import KeyringKit

/// How GErrors from libsecret map to KeyringError. KWallet answers "Can't find session …" when it
/// could not decrypt a secret sent over a session whose key it derived wrongly; libsecret strips the
/// remote error name on the way, so the message is all that is left. Those errors must be recognised
/// as a failed transfer session (retried with a new session), never as an unavailable keyring.
@Suite struct SecretErrorClassificationTests {
    func classify(_ make: () -> UnsafeMutablePointer<GError>) -> KeyringError {
        let error = make()
        defer { g_error_free(error) }
        return SecretServiceKeyring.classify(error)
    }

    @Test func kwalletsDroppedSessionIsStaleWhateverTheDomain() {
        let stripped = classify {
            g_error_new_literal(g_io_error_quark(), 0, "Can't find session /org/freedesktop/secrets/session/7")
        }
        #expect(stripped == .other(SecretServiceKeyring.staleSession))
        let remote = classify {
            g_dbus_error_new_for_dbus_error("org.qtproject.QtDBus.Error.InvalidObjectPath", "no such object")
        }
        #expect(remote == .other(SecretServiceKeyring.staleSession))
        let shortKey = classify { g_error_new_literal(g_io_error_quark(), 0, "Client public key size is invalid") }
        #expect(shortKey == .other(SecretServiceKeyring.staleSession))
    }

    /// SetSecret on an item another process deleted since it was found (KeePassXC answers GDBus's
    /// UNKNOWN_OBJECT): a replacement that falls back to creating the item, not "no Secret Service".
    @Test func anItemThatIsGoneIsToldApart() {
        func gone(_ make: () -> UnsafeMutablePointer<GError>) -> Bool {
            let error = make()
            defer { g_error_free(error) }
            return SecretServiceKeyring.isGone(error)
        }
        #expect(gone { g_error_new_literal(g_dbus_error_quark(), gint(G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue), "No such object") })
        #expect(gone { g_dbus_error_new_for_dbus_error("org.freedesktop.DBus.Error.UnknownObject", "no such object") })
        #expect(gone { g_dbus_error_new_for_dbus_error("org.freedesktop.Secret.Error.NoSuchObject", "no such item") })
        #expect(!gone { g_dbus_error_new_for_dbus_error("org.freedesktop.Secret.Error.IsLocked", "locked") })
        #expect(!gone { g_dbus_error_new_for_dbus_error("org.freedesktop.DBus.Error.ServiceUnknown", "gone") })
    }

    @Test func otherErrorsKeepTheirMeaning() {
        #expect(
            classify { g_dbus_error_new_for_dbus_error("org.freedesktop.Secret.Error.IsLocked", "locked") } == .locked)
        #expect(
            classify { g_dbus_error_new_for_dbus_error("org.freedesktop.DBus.Error.ServiceUnknown", "gone") }
                == .noService)
        #expect(
            classify {
                g_error_new_literal(g_io_error_quark(), gint(G_IO_ERROR_TIMED_OUT.rawValue), "Timeout was reached")
            } == .timeout)
        let unrelated = classify { g_error_new_literal(g_io_error_quark(), 0, "session closed by peer") }
        #expect(unrelated != .other(SecretServiceKeyring.staleSession))
    }
}
