import PlatformKit
import SodiumKit

/// Undoing a sign-in that will not become an account (docs/security.md#tok-6): the new session is
/// signed out at the server (best effort: it is valid and nobody would ever use or revoke it
/// otherwise), then every guest item and the journal are deleted — after a refused re-login, a
/// failed identification, an error before the account was known, and on the next command after a
/// crash in phase `signingIn`. An API key is never signed out (it is the user's own key).
extension LoginService {
    /// Signs out the guest session (if any), deletes the guest items and clears the journal.
    func abandonGuest(_ journal: LoginJournal) throws(OStackError) {
        // This home's item, and the one a sign-in of a version before per-home items left (`guest`):
        // its session too is signed out, not left valid and forgotten.
        let sessions = [environment.guestKey(.sessionToken), environment.namespaces.legacyGuestKey(.sessionToken)]
        if journal.credentialKind == .session, let server = try? ServerURL(parsing: journal.server, allowInsecureHTTP: true) {
            let api = AuthAPI(
                server: server, transport: environment.transport, routes: journal.routes ?? ServerRoutes())
            for key in sessions {
                if let token = try? environment.secrets.read(key) { try? api.signOut(token: SessionCredential(token)) }
            }
        }
        try deleteGuestItems()
        try LoginJournal.clear(environment.layout)
    }

    /// Deletes this home's guest items and those of a version before per-home items.
    func deleteGuestItems() throws(OStackError) {
        for kind in [SecretKind.sessionToken, .apiKey] {
            try environment.secrets.delete(environment.guestKey(kind))
            try environment.secrets.delete(environment.namespaces.legacyGuestKey(kind))
        }
    }

    /// A login journal nobody can read (it is written atomically, so something outside ostack
    /// damaged it) records a sign-in that cannot be finished or signed out (its server is unknown):
    /// the guest items are deleted and the journal is set aside as `login-journal.json.damaged`,
    /// so that one damaged file does not stop every command of every account. The user signs in again.
    func abandonUnreadableJournal() throws(OStackError) {
        try deleteGuestItems()
        let path = LoginJournal.path(environment.layout)
        do {
            try SecureFileSystem.replace(path + ".damaged", with: path)
        } catch {
            try LoginJournal.clear(environment.layout)
        }
        environment.auditGlobal("sign-in", outcome: "failed", details: ["reason": "damaged-journal"])
    }

    /// After `login` failed in this process: a sign-in that never reached phase `migrating` is
    /// undone now (signed out, guest namespace emptied) rather than left for the next command.
    func abandonFailedSignIn() {
        guard SecureFileSystem.exists(LoginJournal.path(environment.layout)) else { return }
        guard let lock = try? FileLock(path: environment.loginLockPath, timeout: environment.lockTimeout) else {
            return
        }
        withExtendedLifetime(lock) {
            guard let journal = try? LoginJournal.load(environment.layout), journal.phase == .signingIn else { return }
            try? abandonGuest(journal)
        }
    }
}
