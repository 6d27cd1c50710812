import Glibc
import PlatformKit

/// Where ostack keeps its files (docs/storage.md, "File layout").
///
/// | role    | default                                   | with `OSTACK_HOME=<dir>` |
/// |---------|-------------------------------------------|--------------------------|
/// | config  | `$XDG_CONFIG_HOME/ostack` (`~/.config`)   | `<dir>/config`           |
/// | data    | `$XDG_DATA_HOME/ostack` (`~/.local/share`) | `<dir>/data`             |
/// | state   | `$XDG_STATE_HOME/ostack` (`~/.local/state`) | `<dir>/state`           |
/// | runtime | `$XDG_RUNTIME_DIR/ostack`, else `/tmp/ostack-<uid>` | `<dir>/run`     |
///
/// Relative XDG paths are ignored, as the XDG Base Directory specification requires. The layout is
/// computed from an explicit environment so tests never touch the real home directory.
///
/// One directory is the user's, not a home's: `claimsDirectory` (`$XDG_RUNTIME_DIR/ostack-claims`,
/// else `/tmp/ostack-claims-<uid>`, whatever `OSTACK_HOME` says) holds the locks under which homes
/// claim an account's keyring namespace (`HomeClaim`).
public struct FileLayout: Sendable, Equatable {
    public let configDirectory: String
    public let dataDirectory: String
    public let stateDirectory: String
    public let runtimeDirectory: String
    /// Shared by every home of this user (see the type's note); nil: this home's runtime directory.
    public let claimsDirectory: String

    public init(
        configDirectory: String, dataDirectory: String, stateDirectory: String, runtimeDirectory: String,
        claimsDirectory: String? = nil
    ) {
        self.configDirectory = configDirectory
        self.dataDirectory = dataDirectory
        self.stateDirectory = stateDirectory
        self.runtimeDirectory = runtimeDirectory
        self.claimsDirectory = claimsDirectory ?? runtimeDirectory + "/claims"
    }

    /// Resolves the layout from environment variables.
    /// - Parameters:
    ///   - environment: the process environment (or a test's).
    ///   - userID: the real uid, for the runtime-directory fallback.
    ///   - homeDirectory: used when `HOME` is unset (the password database's entry).
    public init(environment: [String: String], userID: UInt32, homeDirectory: String? = nil) {
        let claims =
            Self.absolute(environment["XDG_RUNTIME_DIR"]).map { Self.trimmingTrailingSlashes($0) + "/ostack-claims" }
            ?? "/tmp/ostack-claims-\(userID)"
        if let root = Self.absolute(environment["OSTACK_HOME"]) {
            let root = Self.trimmingTrailingSlashes(root)
            self.init(
                configDirectory: root + "/config", dataDirectory: root + "/data",
                stateDirectory: root + "/state", runtimeDirectory: root + "/run", claimsDirectory: claims)
            return
        }
        let home = Self.trimmingTrailingSlashes(Self.absolute(environment["HOME"]) ?? homeDirectory ?? "/")
        func xdg(_ name: String, _ fallback: String) -> String {
            Self.trimmingTrailingSlashes(Self.absolute(environment[name]) ?? home + fallback) + "/ostack"
        }
        let runtime: String
        if let xdgRuntime = Self.absolute(environment["XDG_RUNTIME_DIR"]) {
            runtime = Self.trimmingTrailingSlashes(xdgRuntime) + "/ostack"
        } else {
            runtime = "/tmp/ostack-\(userID)"
        }
        self.init(
            configDirectory: xdg("XDG_CONFIG_HOME", "/.config"),
            dataDirectory: xdg("XDG_DATA_HOME", "/.local/share"),
            stateDirectory: xdg("XDG_STATE_HOME", "/.local/state"),
            runtimeDirectory: runtime, claimsDirectory: claims)
    }

    // MARK: Well-known files

    /// The account registry (non-secret metadata only).
    public var registryFile: String { dataDirectory + "/accounts.json" }
    /// Per-account data directories live below this.
    public var accountsDirectory: String { dataDirectory + "/accounts" }
    /// The configuration file (default account, settings).
    public var configFile: String { configDirectory + "/config.json" }
    /// Lock files for cross-process single flight.
    public var locksDirectory: String { stateDirectory + "/locks" }
    /// The redacted debug log.
    public var debugLogFile: String { stateDirectory + "/debug.log" }

    /// The data directory of one account (`directoryName` comes from the registry).
    public func accountDirectory(_ directoryName: String) -> String {
        accountsDirectory + "/" + directoryName
    }

    /// Creates every directory of the layout with mode 0700. None may be a symbolic link; the state
    /// directory (locks, journals, the debug log) is accepted only when it is ours and private
    /// (docs/security.md#fs-2).
    public func createDirectories() throws(PlatformError) {
        for directory in [configDirectory, dataDirectory, accountsDirectory] {
            try SecureFileSystem.createDirectory(directory)
        }
        try SecureFileSystem.createPrivateDirectory(stateDirectory)
        try SecureFileSystem.createDirectory(locksDirectory)
    }

    /// Refuses a home that is not this user's (docs/security.md#fs-2): each directory of the layout
    /// that exists (config, data, state) must be a real directory owned by the effective user that
    /// no one else can write to, and the state directory (locks, journals) closed to group and others
    /// altogether. Checked before a command opens the keyring or an account's files, so another
    /// user's home (a shared `OSTACK_HOME`, `sudo -E`) is never written into — its files would then
    /// belong to someone else and stop its owner's commands. (A configuration directory made by
    /// hand with the usual 0755 is fine: it holds no secret.)
    public func checkHome() throws(OStackError) {
        for (directory, role, strict) in [
            (configDirectory, "the configuration directory", false), (dataDirectory, "the data directory", false),
            (stateDirectory, "the state directory", true),
        ] where SecureFileSystem.exists(directory) || SecureFileSystem.isSymbolicLink(directory) {
            do {
                if strict {
                    try SecureFileSystem.checkPrivateDirectory(directory)
                } else {
                    try SecureFileSystem.checkOwnDirectory(directory)
                }
            } catch {
                var refused = OStackError.storage(error, role: role)
                if refused.code == .unsafeStorage {
                    refused.context.suggestion =
                        "\(directory) must be yours, not a link, and writable by no one else\(strict ? " (mode 0700)" : ""): check OSTACK_HOME (another user's home is never used), or chmod 700 it."
                }
                throw refused
            }
        }
    }

    /// Creates the runtime directory (0700), or accepts it only when it is ours and private (the
    /// fallback `/tmp/ostack-<uid>` may have been made by another user) — only the agent and its
    /// clients need it (docs/security.md#lock-3).
    public func createRuntimeDirectory() throws(PlatformError) {
        try SecureFileSystem.createPrivateDirectory(runtimeDirectory)
    }

    /// Checks an account's directory and the given files in it before they are opened: the
    /// directory must be a real directory (not a symbolic link) and no file a symbolic link
    /// (docs/security.md#fs-2). SQLite (3.15) cannot open without following links, so `data.db`
    /// and its `-wal`/`-shm` are checked here first.
    public func checkAccountFiles(_ directoryName: String, files: [String]) throws(OStackError) {
        let directory = accountDirectory(directoryName)
        do {
            try SecureFileSystem.refuseSymbolicLink(dataDirectory)
            try SecureFileSystem.refuseSymbolicLink(accountsDirectory)
            try SecureFileSystem.refuseSymbolicLink(directory)
        } catch {
            throw OStackError.unsafe(error, role: "the account directory")
        }
        for file in files {
            do {
                try SecureFileSystem.refuseSymbolicLink(directory + "/" + file)
            } catch {
                throw OStackError.unsafe(error, role: "the account file \(file)")
            }
        }
    }

    private static func absolute(_ value: String?) -> String? {
        guard let value, value.hasPrefix("/") else { return nil }
        return value
    }

    private static func trimmingTrailingSlashes(_ path: String) -> String {
        var result = path
        while result.count > 1 && result.hasSuffix("/") { result.removeLast() }
        return result
    }
}

extension OStackError {
    /// A file-system failure as the user sees it: an unsafe path (a planted symbolic link, a
    /// directory of another user or open to others) is `unsafe-storage` naming its role, anything
    /// else `storage-failure`.
    /// A directory where a file belongs (EISDIR) is not what ostack keeps there either: named, not
    /// "Local storage failed. Check free disk space".
    /// No space left (ENOSPC, or EDQUOT: a quota) is `storage-full`.
    public static func storage(_ error: PlatformError, role: String) -> OStackError {
        if error.isUnsafePath || error.errno == EISDIR { return unsafe(error, role: role) }
        let full = error.errno == ENOSPC || error.errno == EDQUOT
        return OStackError(full ? .storageFull : .storageFailure, detail: "\(role): \(error)")
    }

    /// `unsafe-storage` for `role` (our wording: "the agent's runtime directory", …).
    static func unsafe(_ error: PlatformError, role: String) -> OStackError {
        OStackError(.unsafeStorage, context: .init(object: role), detail: "\(role): \(error)")
    }
}
