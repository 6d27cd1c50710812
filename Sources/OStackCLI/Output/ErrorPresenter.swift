import OStackCore

/// The one place where errors become what the user sees (docs/errors.md; docs/security.md#err-1 … #err-5).
///
/// It switches over every `OStackError.Code` and returns our own message, an optional hint and the
/// exit code of the table in docs/errors.md. It never interpolates `String(describing:)` of an error, causes,
/// SQL, HTTP bodies or server messages; the only values it shows come from `OStackError.Context`
/// (an alias, a host, field names/labels), and those are stripped of control characters. Anything
/// that is not an `OStackError` becomes "Something went wrong." with a reference id.
public struct ErrorPresenter: Sendable {
    public struct Presentation: Sendable, Equatable {
        public var code: String
        public var message: String
        public var hint: String?
        public var exitCode: Int32
    }

    public init() {}

    /// Maps any error. `referenceID` is used for unknown errors (the caller logs the redacted detail
    /// under the same id).
    public func present(_ error: any Error, referenceID: String) -> Presentation {
        guard let error = error as? OStackError else {
            return unknown(referenceID: referenceID)
        }
        return present(error, referenceID: referenceID)
    }

    public func present(_ error: OStackError, referenceID: String) -> Presentation {
        let context = error.context
        let account = context.account.map { Self.sanitize($0) }
        let host = context.host.map { Self.sanitize($0) }
        let named = account.map { " \($0)" } ?? ""
        let fields = context.fields.map { Self.sanitize($0) }
        let suggestion = context.suggestion.map { Self.sanitize($0.rendered) }
        func make(_ message: String, _ hint: String?, _ exit: Int32) -> Presentation {
            let saved = " The change is saved and queued."
            let text = context.savedAndQueued && !message.contains("saved and queued") ? message + saved : message
            return Presentation(code: error.code.rawValue, message: text, hint: hint, exitCode: exit)
        }
        switch error.code {
        case .internal:
            return Presentation(
                code: error.code.rawValue, message: "Something went wrong. (ref \(referenceID))",
                hint: "Run the command again with --verbose, or report the reference id.", exitCode: 1)
        case .notSignedIn:
            return make(
                "Account\(named) is not signed in.", "Run `ostack login\(account.map { " --account \($0)" } ?? "")`.",
                3)
        case .sessionExpired:
            return make(
                "The session of account\(named) has expired. Local data and queued changes are kept.",
                "Run `ostack login` to sign in again.", 3)
        case .locked:
            return make("Account\(named) is locked.", "Run `ostack unlock\(account.map { " \($0)" } ?? "")`.", 4)
        case .pinLockedOut:
            return make(
                "Too many wrong PINs: the PIN of account\(named) no longer works.",
                "Unlock with the recovery key (`ostack unlock --recovery-key`), or sign in again with "
                    + "`ostack login --rebuild-local-data` to rebuild local data from the server.", 4)
        case .wrongPIN:
            let left = context.count.map { " \($0) attempt\($0 == 1 ? "" : "s") left." } ?? ""
            return make("Incorrect PIN.\(left)", nil, 4)
        case .wrongRecoveryKey:
            return make("Incorrect recovery key.", "Check the key as it was shown when the PIN was set.", 4)
        case .offline:
            return make(
                "Cannot reach \(host ?? "the server").\(context.count.map { _ in " The change is saved and queued." } ?? "")",
                suggestion
                    ?? (context.count == nil && !context.savedAndQueued
                        ? "Check the connection." : "Check the connection; `ostack sync` pushes queued changes later."),
                5)
        case .tls:
            return make(
                "The secure connection to \(host ?? "the server") could not be verified.",
                "Check the server URL and its certificate; ostack never skips certificate checks.", 5)
        case .timeout:
            return make(
                "\(host ?? "The server") did not answer in time.\(context.count.map { _ in " The change is saved and queued." } ?? "")",
                suggestion.map { "\($0) --timeout allows a slow server longer." }
                    ?? (context.count == nil
                        ? "Try again later, or allow longer with --timeout."
                        : "`ostack sync` pushes queued changes later; --timeout allows a slow server longer."),
                5)
        case .conflict:
            return make(
                "The record was changed on the server since you last saw it.",
                suggestion ?? "Run `ostack conflicts list` to review and resolve it.", 6)
        case .notFound:
            // Say what was not found: queued changes whose records are gone, a record, or an object's record.
            if let count = context.count, context.recordIDs.isEmpty {
                return make(
                    "\(count) queued \(count == 1 ? "change is" : "changes are") for records the server no longer has"
                        + "\(account.map { " (account \($0))" } ?? "").",
                    suggestion.map { "\($0) `ostack queue discard ID` drops one." }, 7)
            }
            let object = context.object.map { Self.sanitize($0) }
            if let id = context.recordIDs.first.map({ Self.sanitize($0, maxLength: 64) }) {
                return make(
                    "No \(object ?? "such") record \(id)\(account.map { " in account \($0)" } ?? "").",
                    suggestion ?? object.map { "`ostack records list \($0)` lists its records." }, 7)
            }
            if let object { return make("No such \(object) record.", suggestion, 7) }
            return make("Not found.", suggestion, 7)
        case .unknownAccount:
            return make(
                "No account matches \(Self.quoted(account)).",
                suggestion ?? "Run `ostack accounts list` to see accounts.", 7)
        case .ambiguousAccount:
            return make(
                "\(Self.quoted(account)) matches more than one account\(suggestion.map { ": \($0)" } ?? "").",
                "Use more of the alias, or the account id.", 7)
        case .noAccount:
            return make(
                "No account selected.",
                context.count == 0
                    ? "Run `ostack login` to add one." : "Run `ostack switch ACCOUNT` or pass --account.", 7)
        case .unknownObject:
            return make(
                context.object.map { "Unknown object '\(Self.sanitize($0))'." } ?? "Unknown object.",
                "Run `ostack objects list` to see objects.", 7)
        case .forbidden:
            return make("Account\(named) is not allowed to do this.", suggestion, 8)
        case .validation:
            let list = fields.isEmpty ? "" : ": " + fields.joined(separator: ", ")
            return make("The data is not valid\(list).", suggestion, 9)
        case .olderChangeFailed:
            let count = context.count ?? 1
            let first = [context.object, context.recordIDs.first].compactMap {
                $0.map { Self.sanitize($0, maxLength: 64) }
            }
            return make(
                "\(count == 1 ? "An older queued change" : "\(count) older queued changes")"
                    + "\(first.isEmpty ? "" : " (\(first.joined(separator: " "))\(count == 1 ? "" : ", …"))")"
                    + " sent with this one did not go through; this one did.",
                suggestion
                    ?? "Run `ostack queue list` to see \(count == 1 ? "it" : "them"); `ostack sync` tries again.", 11)
        case .refused:
            let count = context.count ?? 1
            let list = fields.isEmpty ? "" : ": " + fields.joined(separator: ", ")
            return make(
                "The server refused \(count) change\(count == 1 ? "" : "s")\(account.map { " (account \($0))" } ?? "")\(list).",
                suggestion ?? "Run `ostack queue list` to see them; `ostack queue discard ID` drops one.", 9)
        case .deleteRestricted:
            let object = context.object.map { Self.sanitize($0, maxLength: 64) + " " } ?? ""
            return make(
                "The server will not delete this \(object)record: other records refer to it.",
                suggestion ?? "Delete or change the records that refer to it first, then delete it again.", 9)
        case .invalidFilter:
            return make("The filter is not valid.", suggestion, 9)
        case .invalidInput:
            return make("The input is not valid.", suggestion, 9)
        case .requestTooLong:
            return make(
                "The request is too long for \(host ?? "the server"): its address, usually its filter, is longer than servers take (about 8 KiB).",
                "Use a shorter filter (fewer terms or values), or filter the local mirror with --local.", 9)
        case .invalidSetting:
            return make(
                "The setting \(Self.sanitize(context.object ?? "")) in config.json is not valid. Nothing was done.",
                suggestion, 9)
        case .invalidServerURL:
            return make(
                "That is not a valid server URL.", "Use a host name such as crm.example.com or an https:// URL.", 9)
        case .insecureServerURL:
            return make(
                "Refusing plain http:// to \(host ?? "a remote host").",
                "Use https://, or pass --allow-insecure-http if you really mean it.", 9)
        case .notObjectStack:
            return make(
                "\(host ?? "The server") does not look like an ObjectStack server.",
                "Check the server URL (ostack looks for /api/v1/discovery).", 9)
        case .wrongCredentials:
            return make("Incorrect e-mail, password or API key.", nil, 3)
        case .passwordExpired:
            return make(
                "The password of account\(named) has expired. Queued changes are kept.",
                "Change your password in the ObjectStack web app, then run `ostack sync`.", 3)
        case .mfaRequired:
            return make(
                "Account\(named) must set up multi-factor authentication first. Queued changes are kept.",
                "Set up an authenticator app in the ObjectStack web app, then run `ostack sync`.", 3)
        case .twoFactorRequired:
            if !fields.isEmpty {
                return make(
                    "The server asks for a second factor ostack cannot complete (\(fields.joined(separator: ", "))).",
                    "Sign in with an authenticator app (TOTP) or a backup code, or use an API key.", 3)
            }
            return make(
                "Signing in needs a two-factor code.",
                "Run the command on a terminal to be asked for it, or pass --totp CODE (or --backup-code-stdin).", 3)
        case .wrongTwoFactorCode:
            return make("The two-factor code is incorrect or has expired.", "Sign in again with a current code.", 3)
        case .unsyncedChanges:
            let count = context.count.map { "\($0) unsynced change\($0 == 1 ? "" : "s")" } ?? "unsynced changes"
            return make(
                "Account\(named) has \(count).", "Run `ostack sync` first, or pass --force to discard them.", 9)
        case .inputRequired:
            return make(
                "This needs input, but --no-input is set or stdin is not a terminal.", suggestion, 9)
        case .keyringDamaged:
            return make("The file keyring cannot be read: its file is damaged.", suggestion, 10)
        case .keyringUnavailable:
            // Not "use --keyring file" for every command: it chooses the backend of new sign-ins only, so
            // a command on an existing account would send the user round in a loop. `login` adds it.
            return make(
                "No keyring (Secret Service) is available.",
                suggestion
                    ?? ("Start your desktop keyring (gnome-keyring, KWallet or KeePassXC): this account's secrets are "
                        + "there. (--keyring file only chooses the backend of a new sign-in.)"),
                10)
        case .keyringLocked:
            return make("The keyring is locked.", suggestion ?? "Unlock your desktop keyring and try again.", 10)
        case .keyringTimeout:
            return make(
                "The keyring did not answer in time.", suggestion ?? "Check that the keyring daemon is running.", 10)
        case .wrongPassphrase:
            return make("The keyring passphrase is incorrect.", nil, 10)
        case .storageUnreadable:
            return make(
                "The local data of account\(named) cannot be read.",
                "Restore the account's directory from a backup; without one, `ostack accounts remove"
                    + "\(named) --force` and signing in again rebuild it from the server (unsynced changes are lost)."
                    + " `ostack doctor` says more.", 10)
        case .notEnoughMemory:
            let needed = context.count.map { " (the PIN's key derivation needs \($0) MiB)" } ?? ""
            return make(
                "Not enough memory to unlock\(account.map { " account \($0)" } ?? "")\(needed). The attempt was not counted.",
                "Close other programs and try again.", 10)
        case .agentUnresponsive:
            return make(
                "The ostack agent does not answer (stopped or hung), so the key cannot be handed to it.",
                "Run `ostack agent stop` (it ends the agent; every account is locked), then try again.", 10)
        case .pinBusy:
            return make(
                "Another ostack command is using the PIN of account\(named) (a `pin set` still showing its recovery key, an unlock).",
                "Try again when it is done.", 10)
        case .storageFailure:
            return make("Local storage failed.", "Check free disk space and permissions, then run `ostack doctor`.", 10)
        case .storageFull:
            return make(
                "Local storage failed: the disk that holds ostack's files is full. What was being written was not saved; what was saved before is kept.",
                "Free some disk space, then run the command again.", 10)
        case .storageMissing where context.object == "pin.env":
            return make(
                "The PIN envelope (pin.env) of account\(named) is missing: the PIN cannot open the data. This is not a lockout.",
                "Restore pin.env from a backup, or unlock with the recovery key"
                    + "\(account.map { " (`ostack unlock \($0) --recovery-key`)" } ?? "") and set a new PIN.", 10)
        case .storageMissing:
            return make(
                "The local database of account\(named) is missing or empty. Nothing was recreated.",
                "Restore the account's data.db from a backup; or sign in again (`ostack login`) to start a new "
                    + "local database — changes that were only in the old one are lost.", 10)
        case .unsafeStorage:
            let what = context.object.map { Self.sanitize($0) } ?? "a local ostack path"
            return make(
                "Refusing to use \(what): it is a symbolic link, not what ostack keeps there, belongs to another user "
                    + "or is open to others. "
                    + "Nothing was read, written or sent through it.",
                suggestion
                    ?? "Remove it (ostack recreates it privately) or set XDG_RUNTIME_DIR; without it the agent uses "
                    + "/tmp/ostack-<uid>, which must be yours with mode 0700.", 10)
        case .unsupportedFormat where context.object != nil:
            // A file named by what reads it: damaged (not JSON, not its own version's shape).
            return make(
                "\(Self.sanitize(context.object ?? "")) cannot be read: it is damaged. Nothing was changed.",
                suggestion, 10)
        case .unsupportedFormat:
            return make(
                "Local ostack files are in a format this version does not understand. Nothing was changed.",
                "Use the ostack version that wrote them, or run `ostack doctor`.", 10)
        case .serverError:
            return make("The server had a problem.", suggestion ?? "Try again later.", 11)
        case .rateLimited:
            let wait = context.retryAfterSeconds.map { "Try again in \($0) s." } ?? "Try again later."
            return make("The server is limiting requests.", wait, 11)
        case .unexpectedResponse:
            return make("The server sent a response ostack does not understand.", suggestion ?? "Try again later.", 11)
        case .declined:
            return make("Nothing was changed.", "Pass --yes to skip the question.", 1)
        case .identityMismatch:
            return make(
                "The server answered for another user than the one signed in\(account.map { " as \($0)" } ?? ""). "
                    + "Nothing was saved or adopted.",
                "Check the server address\(host.map { " (\($0))" } ?? ""); if it is right, report this to its administrator.",
                11)
        case .accountInAnotherHome:
            return make(
                "This account\(host.map { " of \($0)" } ?? "") is signed in from another ostack home on this keyring (another OSTACK_HOME or "
                    + "XDG data directory): its keyring items serve one home at a time. Nothing was saved.",
                "Use the account from that home, or remove it there (`ostack accounts remove`) first; to keep both, "
                    + "give this home a keyring namespace of its own with OSTACK_KEYRING_PREFIX.", 10)
        case .rejectedRecords:
            let count = context.count ?? max(1, context.recordIDs.count)
            let shown = context.recordIDs.prefix(5).map { Self.sanitize($0, maxLength: 64) }
            let list =
                shown.isEmpty ? "" : ": " + shown.joined(separator: ", ") + (context.recordIDs.count > 5 ? ", …" : "")
            let what = context.object.map { " of \(Self.sanitize($0))" } ?? ""
            return make(
                "\(count) \(count == 1 ? "record" : "records")\(what) from the server could not be stored "
                    + "(not valid JSON, nested too deep, or a number out of range)\(list).",
                "The other records synced; these are not taken (an older local copy is flagged invalid) until they change on the server.",
                11)
        case .unconfirmed:
            return make(
                "The server answered without confirming the change. It is saved and queued.",
                "`ostack sync` checks whether it arrived and sends it again only if not.", 11)
        }
    }

    /// The generic message for errors that are not ours.
    public func unknown(referenceID: String) -> Presentation {
        Presentation(
            code: OStackError.Code.internal.rawValue, message: "Something went wrong. (ref \(referenceID))",
            hint: "Run the command again with --verbose, or report the reference id.", exitCode: 1)
    }

    /// The one sanitiser for everything that reaches a terminal (docs/security.md#err-3): removes C0
    /// and C1 controls and DEL; escape sequences whole — CSI (`ESC [` or `0x9B` … final byte) and the
    /// string sequences OSC, DCS, SOS, PM, APC (`ESC ]`, `ESC P`, `ESC X`, `ESC ^`, `ESC _` or their C1
    /// forms) *with their payload* up to BEL or ST; bidirectional overrides and isolates (which
    /// can make text read in another order); and the line and paragraph separators U+2028/U+2029
    /// (a line break to some terminals). Bounds the length.
    public static func sanitize(_ text: String, maxLength: Int = 200) -> String {
        let scalars = Array(text.unicodeScalars)
        var result = String.UnicodeScalarView()
        var index = 0
        func skipString() {  // to BEL, C1 ST or ESC \
            while index < scalars.count {
                let value = scalars[index].value
                index += 1
                if value == 0x07 || value == 0x9C { return }
                if value == 0x1B, index < scalars.count, scalars[index] == "\\" {
                    index += 1
                    return
                }
            }
        }
        func skipCSI() {  // parameters and intermediates, then one final byte
            while index < scalars.count, !(0x40...0x7E).contains(scalars[index].value) { index += 1 }
            index += 1
        }
        while index < scalars.count {
            let scalar = scalars[index]
            let value = scalar.value
            index += 1
            switch value {
            case 0x1B:
                guard index < scalars.count else { break }
                let kind = scalars[index].value
                index += 1
                if kind == 0x5B {
                    skipCSI()
                } else if [0x5D, 0x50, 0x58, 0x5E, 0x5F].contains(kind) {
                    skipString()
                }
            case 0x9B: skipCSI()
            case 0x90, 0x98, 0x9D, 0x9E, 0x9F: skipString()
            case 0..<0x20, 0x7F, 0x80...0x9F: continue
            case _ where Self.isBidiControl(value), 0x2028, 0x2029: continue  // and line/paragraph separators
            default: result.append(scalar)
            }
        }
        return String(String(result).prefix(maxLength))
    }

    /// Bidirectional embeddings, overrides, isolates and marks (U+061C, U+200E–F, U+202A–E, U+2066–9).
    static func isBidiControl(_ value: UInt32) -> Bool {
        value == 0x061C || value == 0x200E || value == 0x200F || (0x202A...0x202E).contains(value)
            || (0x2066...0x2069).contains(value)
    }

    private static func quoted(_ value: String?) -> String {
        value.map { "'\($0)'" } ?? "that"
    }
}
