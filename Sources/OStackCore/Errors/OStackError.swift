/// The core's one error type (docs/errors.md).
///
/// Lower-layer errors (`SQLiteError`, `KeyringError`, `HTTPError`, …) are wrapped once, where their
/// meaning is known, into a stable `Code`. The CLI's error presenter switches over `code` and prints
/// only its own wording plus the `context` values that are explicitly safe to show (an account
/// alias, a host, field labels from metadata). `detail` is for the redacted debug log only.
public struct OStackError: Error, Sendable {
    /// Stable, lower-case codes (docs/errors.md). Adding a case means adding a message, a hint, an exit
    /// code, a row in docs/errors.md and a test.
    public enum Code: String, Sendable, CaseIterable {
        case `internal` = "internal"
        case notSignedIn = "not-signed-in"
        case sessionExpired = "session-expired"
        case locked = "locked"
        case pinLockedOut = "pin-locked-out"
        case wrongPIN = "wrong-pin"
        /// The OS refused the memory a PIN's key derivation needs (SOD-3); the attempt is not counted.
        case notEnoughMemory = "not-enough-memory"
        case wrongRecoveryKey = "wrong-recovery-key"
        case offline = "offline"
        case tls = "tls"
        case timeout = "timeout"
        case conflict = "conflict"
        case notFound = "not-found"
        case unknownAccount = "unknown-account"
        case ambiguousAccount = "ambiguous-account"
        case noAccount = "no-account"
        case unknownObject = "unknown-object"
        case forbidden = "forbidden"
        case validation = "validation"
        /// The server refused changes as they stand (a validation or unique-value refusal);
        /// `context.count` says how many. Those a command undid are gone; queued ones stay failed.
        case refused = "refused"
        /// The server will not delete a record while others refer to it (409 `DELETE_RESTRICTED`);
        /// `context.object` names its object. The delete is undone: the record is back.
        case deleteRestricted = "delete-restricted"
        case invalidFilter = "invalid-filter"
        case invalidInput = "invalid-input"
        /// A setting in config.json (edited by hand) whose value ostack cannot use: `context.object`
        /// names it. Commands that use the keyring or the server stop instead of using the default.
        case invalidSetting = "invalid-setting"
        /// A request whose address is longer than servers take (a long filter): not sent when
        /// ostack builds it over `DataAPI.maxURLBytes`, or answered 414/431.
        case requestTooLong = "request-too-long"
        case invalidServerURL = "invalid-server-url"
        case insecureServerURL = "insecure-server-url"
        case notObjectStack = "not-objectstack"
        case wrongCredentials = "wrong-credentials"
        /// The server's auth policy: the password must be changed before data can be used.
        case passwordExpired = "password-expired"
        /// The server's auth policy: multi-factor authentication must be set up first.
        case mfaRequired = "mfa-required"
        /// Sign-in needs a second factor ostack was not given (no terminal, no `--totp`), or one it
        /// cannot complete (`context.fields` names the server's methods).
        case twoFactorRequired = "two-factor-required"
        case wrongTwoFactorCode = "wrong-two-factor-code"
        case unsyncedChanges = "unsynced-changes"
        case inputRequired = "input-required"
        case keyringUnavailable = "keyring-unavailable"
        /// The file backend's file cannot be read as one (not a missing Secret Service).
        case keyringDamaged = "keyring-damaged"
        case keyringLocked = "keyring-locked"
        case keyringTimeout = "keyring-timeout"
        case wrongPassphrase = "wrong-passphrase"
        case storageUnreadable = "storage-unreadable"
        case storageFailure = "storage-failure"
        /// A storage failure while the file system holding ostack's files has (almost) no space left.
        case storageFull = "storage-full"
        /// Another command holds the account's PIN lock (a `pin set` showing its recovery key).
        case pinBusy = "pin-busy"
        /// The agent holds its socket but accepts or answers nothing (stopped, hung).
        case agentUnresponsive = "agent-unresponsive"
        /// A registered account's `data.db` is missing or empty: reported, never silently recreated.
        case storageMissing = "storage-missing"
        /// A path ostack would use is unsafe: a planted symbolic link, a runtime or state directory
        /// of another user or open to others, or an agent socket served by another uid.
        case unsafeStorage = "unsafe-storage"
        case unsupportedFormat = "unsupported-format"
        case serverError = "server-error"
        case rateLimited = "rate-limited"
        case unexpectedResponse = "unexpected-response"
        /// A write answered with success but without the record: saved and kept queued.
        case unconfirmed = "unconfirmed"
        /// A warning, never a command's error: older queued changes of other records that a write's
        /// push sent did not go through (`context.count`, `context.object`, `recordIDs`: the first),
        /// while the write did.
        case olderChangeFailed = "older-change-failed"
        /// Pulled records that are not valid JSON (or nest too deep, or hold a number out of
        /// range): left out of the mirror and named.
        case rejectedRecords = "rejected-records"
        /// The user answered no to a confirmation: nothing was changed.
        case declined = "declined"
        /// The server named another user for a session than the one that signed in.
        case identityMismatch = "identity-mismatch"
        /// The account's keyring namespace serves another ostack home (another `OSTACK_HOME` or XDG
        /// data directory on the same keyring prefix) that still has the account.
        case accountInAnotherHome = "account-in-another-home"
    }

    /// Values that may be shown to the user. Everything here is either ours (an alias the user
    /// chose, a count) or explicitly allowlisted server data (field names and labels from
    /// metadata). Never put tokens, PINs, keys, record contents or server messages here.
    public struct Context: Sendable, Equatable {
        public var account: String?
        public var host: String?
        public var object: String?
        public var fields: [String]
        public var count: Int?
        /// The hint: our own wording, naming commands by value (the CLI spells them).
        public var suggestion: Wording?
        public var retryAfterSeconds: Int?
        public var httpStatus: Int?
        public var requestID: String?
        /// Ids of records the server sent (shown sanitised, a few at most).
        public var recordIDs: [String] = []
        /// The change the command made is saved locally and queued: the message says so, whatever
        /// kept it from the server.
        public var savedAndQueued = false

        public init(
            account: String? = nil, host: String? = nil, object: String? = nil, fields: [String] = [],
            count: Int? = nil, suggestion: Wording? = nil, retryAfterSeconds: Int? = nil,
            httpStatus: Int? = nil, requestID: String? = nil
        ) {
            self.account = account
            self.host = host
            self.object = object
            self.fields = fields
            self.count = count
            self.suggestion = suggestion
            self.retryAfterSeconds = retryAfterSeconds
            self.httpStatus = httpStatus
            self.requestID = requestID
        }
    }

    public var code: Code
    public var context: Context
    /// A developer-facing description for the debug log. It must already be redacted: no secrets,
    /// no bound values, no raw server bodies.
    public var detail: String
    public var file: String
    public var line: Int
    /// Set by the transport when the request certainly never reached the server (connection refused,
    /// no such host, TLS handshake refused): the sync core may then treat it as not delivered.
    public var requestNotSent = false

    public init(
        _ code: Code, context: Context = Context(), detail: String = "", file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.context = context
        self.detail = detail
        self.file = file
        self.line = line
    }
}

extension OStackError: CustomStringConvertible {
    /// For logs and test failures only; the CLI never prints this.
    public var description: String {
        "OStackError(\(code.rawValue)) at \(file):\(line)\(detail.isEmpty ? "" : ": \(detail)")"
    }
}
