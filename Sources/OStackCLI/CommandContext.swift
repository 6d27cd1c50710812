import ArgumentParser
import OStackCore
import CurlKit
import KeyringKit
import PlatformKit

/// What a command needs from the outside world, built once per invocation. `CommandContext+Live`
/// is the only place that builds the real dependencies; tests build their own.
public struct CommandContext: Sendable {
    public var global: GlobalOptions
    public var environment: [String: String]
    public var terminal: Terminal
    public var layout: FileLayout
    public var registry: AccountRegistry
    public var configuration: ConfigurationStore
    public var debugLog: DebugLog
    /// Builds the keyring, HTTP and database dependencies on first use (commands that only read the
    /// registry never touch the keyring).
    public var makeAuthEnvironment: @Sendable (CommandContext) throws(OStackError) -> AuthEnvironment
    /// Whether opening an account counts as use of its unlocked key (false in `sync --watch` after
    /// the first cycle, so a watch does not keep an account from locking itself).
    public var countsAsUse = true
    /// Whether `authEnvironment()` refuses a setting whose value is not valid (`invalid-setting`).
    /// Off for the commands that take access away — `lock`, `logout`, `accounts remove` — which
    /// must work whatever config.json holds.
    public var checksSettings = true

    public init(
        global: GlobalOptions, environment: [String: String], terminal: Terminal, layout: FileLayout,
        makeAuthEnvironment: @escaping @Sendable (CommandContext) throws(OStackError) -> AuthEnvironment
    ) {
        self.makeAuthEnvironment = makeAuthEnvironment
        self.global = global
        self.environment = environment
        self.terminal = terminal
        self.layout = layout
        self.registry = AccountRegistry(layout: layout)
        self.configuration = ConfigurationStore(layout: layout)
        self.debugLog = DebugLog(layout: layout)
    }

    /// The side effects of account and session use cases, after finishing any interrupted login.
    /// A setting in config.json whose value ostack cannot use stops the command first, by name
    /// (`invalid-setting`), unless `checksSettings` is off; commands that do not come here (`config`,
    /// `doctor`, `status`, `accounts list`, `agent`…) still run.
    public func authEnvironment() throws(OStackError) -> AuthEnvironment {
        try layout.checkHome()
        if checksSettings { try configuration.load().checkSettings() }
        let environment = try makeAuthEnvironment(self)
        do {
            try LoginService(environment: environment).recoverInterruptedLogin()
        } catch  where [.storageUnreadable, .storageMissing, .storageFailure, .storageFull, .unsafeStorage].contains(error.code) {
            // A sign-in whose account's database cannot be provisioned (damaged, say) stays
            // journaled for its own account's next `login`; it does not stop every other command.
            debugLog.append(referenceID: "login-recovery", code: error.code.rawValue, detail: error.detail)
        }
        // Interrupted `keyring migrate` and `pin set|change|remove` are finished (or undone) first.
        if KeyringMigration.isPending(layout) {
            try LiveDependencies.keyringMigration(self, environment)?.resumeInterrupted()
        }
        try PINJournal.recoverAll(environment)
        return environment
    }

    /// The account selected for this command (`--account` > `OSTACK_ACCOUNT` > default).
    /// The default account, the common case, decodes only its own registry entry (every command
    /// selects an account at start; `status --short` runs at every shell prompt). Anything else —
    /// `--account`, `OSTACK_ACCOUNT`, an older registry format, a default that is gone — reads the
    /// whole registry, with the same result.
    public func selectedAccount() throws(OStackError) -> (account: Account, source: SelectionSource) {
        let defaultAccount = try configuration.load().defaultAccount
        if global.account?.isEmpty ?? true, environment["OSTACK_ACCOUNT"]?.isEmpty ?? true, let defaultAccount,
            let account = try registry.account(withID: defaultAccount)
        {
            return (account, .default)
        }
        let accounts = try registry.accounts()
        return try AccountSelection(accounts: accounts).select(
            flag: global.account, environment: environment["OSTACK_ACCOUNT"], defaultAccount: defaultAccount)
    }

    /// Account use cases, with the agent asked for lock state.
    public func accountsService() -> AccountsService {
        var service = AccountsService(layout: layout)
        service.agent = AgentClient(layout: layout, namespaces: KeyringNamespaces(environment: environment))
        service.auditEnvironment = { [self] in try? makeAuthEnvironment(self) }
        return service
    }

    /// PIN lock use cases with the configured agent timeouts.
    public func lockService() throws(OStackError) -> LockService {
        let environment = try authEnvironment()
        var service = LockService(
            environment: environment,
            agent: environment.agent ?? AgentClient(layout: layout, namespaces: environment.namespaces),
            processEnvironment: self.environment)
        // Unchecked (`lock`): limits are not used to lock, and a bad value must not stop it.
        service.agentLimits =
            checksSettings
            ? try AgentLimits(configuration: configuration)
            : (try? AgentLimits(configuration: configuration)) ?? .defaults
        if self.environment["OSTACK_PIN_KDF"] == "interactive" { service.pinParameters = { .interactive() } }
        return service
    }

    /// The accounts a command acts on: one reference, the selected account, or all of them.
    /// `exactFor`: what must name the account exactly (a command that cannot be undone), for the hint.
    public func accounts(target: String?, all: Bool, exactFor: String? = nil) throws(OStackError) -> [Account] {
        if all { return try registry.accounts() }
        if let target {
            return [try AccountSelection(accounts: registry.accounts()).resolve(target, exactFor: exactFor)]
        }
        return [try selectedAccount().account]
    }

    /// Queued changes not yet on the server (pending, failed or in conflict); nil when they cannot be
    /// counted because the account is locked (its database key is sealed by the PIN).
    public func unsyncedChanges(_ account: Account) throws(OStackError) -> Int? {
        do {
            let counts = try session(account).store.counts()
            return counts.pending + counts.failed + counts.conflict
        } catch let error where error.code == .locked || error.code == .pinLockedOut {
            return nil
        }
    }

    /// The open data of `account` (opens its database: a locked account is `locked`, exit 4).
    public func session(_ account: Account) throws(OStackError) -> AccountSession {
        var environment = try authEnvironment()
        environment.agent?.countsAsUse = countsAsUse
        let session = try AccountSession(account: account, environment: environment)
        if let seconds = self.environment["OSTACK_METADATA_TTL"].flatMap(Double.init) { session.metadata.ttl = seconds }
        return session
    }

    /// The open data of the selected account (`--account`, `OSTACK_ACCOUNT`, the default).
    public func selectedSession() throws(OStackError) -> AccountSession {
        try session(selectedAccount().account)
    }

    /// Prints a command's result: the JSON document with `--json`, the human text otherwise.
    public func emit<T: Encodable>(json document: T, human: @autoclosure () -> String) {
        emit(json: document, render: human)
    }

    /// Like `emit(json:human:)`, with the human text built by a closure only when needed.
    public func emit<T: Encodable>(json document: T, render human: () -> String) {
        if global.json {
            // `--format ndjson` of a list (a document that is one named array): one item per line.
            if global.format == .ndjson, let items = JSONOutput.listItems(document) {
                terminal.out(items.map { JSONOutput.encode($0) + "\n" }.joined())
            } else {
                terminal.out(JSONOutput.encode(document) + "\n")
            }
        } else {
            let text = human()
            if !text.isEmpty { terminal.out(text.utf8.last == UInt8(ascii: "\n") ? text : text + "\n") }
        }
    }

    /// An error that did not fail the command, as a warning on stderr: `ostack: warning: …` and its
    /// hint, or under `--json` a `{"warning":{code,message,hint}}` document.
    public func warn(_ error: OStackError) {
        let presentation = ErrorPresenter().present(error, referenceID: "-")
        if global.jsonErrors {
            let document = JSONOutput.WarningDocument(
                warning: .init(code: presentation.code, message: presentation.message, hint: presentation.hint))
            terminal.err(JSONOutput.encode(document) + "\n")
        } else {
            terminal.err("ostack: warning: \(presentation.message)\n")
            if let hint = presentation.hint { terminal.err("ostack: hint: \(hint)\n") }
        }
    }

    /// Asks before a destructive step, on a terminal only (stdin and stderr both terminals); `yes`
    /// (`--yes`) skips the question, and so does a script (no terminal), as it always did. With
    /// `--no-input` the step needs `--yes` (`input-required`, exit 9): "never prompt; a command that
    /// needs input fails" — it went ahead as if confirmed. Anything but `y`/`yes` changes nothing
    /// (`declined`, exit 1).
    public func confirm(_ question: String, yes: Bool) throws(OStackError) {
        if yes { return }
        if global.noInput {
            throw OStackError(
                .inputRequired, context: .init(suggestion: "This asks first; pass --yes to go ahead without asking."),
                detail: "confirmation under --no-input")
        }
        if !ProcessEnvironment.isTerminal(0) || !ProcessEnvironment.isTerminal(2) { return }
        terminal.err(ErrorPresenter.sanitize(question, maxLength: 300) + " [y/N] ")
        let answer = (readLine(strippingNewline: true) ?? "").lowercased()
        guard answer == "y" || answer == "yes" else {
            throw OStackError(.declined, detail: "confirmation declined")
        }
    }

    /// Sends the rest of stdout through the pager when a person reads it on a terminal (`Pager`).
    public func page() { Pager.start(context: self) }

    /// Whether a person can be asked: stdin and stderr are terminals and `--no-input` was not given.
    public var canPrompt: Bool {
        !global.noInput && ProcessEnvironment.isTerminal(0) && ProcessEnvironment.isTerminal(2)
    }

    /// Asks for the PIN of the locked account `alias` (no echo, naming the account) and unlocks it;
    /// up to three tries, each one counting towards the lockout. Without a PIN that can still work
    /// (none set, or locked out) nothing is asked and `error` (or `pin-locked-out`) stands.
    func unlockOnDemand(_ alias: String, because error: OStackError) throws(OStackError) {
        guard let account = try registry.accounts().first(where: { $0.alias == alias }) else { throw error }
        let service = try lockService()
        try service.verifyAgent()
        switch service.pinState(account) {
        case .none: throw error
        case .lockedOut: throw service.missingPINError(account)
        case .set: break
        }
        let name = ErrorPresenter.sanitize(account.alias, maxLength: 64)
        for attempt in 1...3 {
            let pin = PIN(
                try SecretInput.prompt(
                    "Account \(name) is locked. PIN for \(name): ", noInput: false, flag: "`ostack unlock --pin-stdin`"))
            do {
                try service.unlock(account, pin: pin)
                return
            } catch let failure where failure.code == .wrongPIN && attempt < 3 {
                terminal.err("Wrong PIN.\n")
            }
        }
    }

    /// A note for the user on stderr (never data), suppressed under `--json`.
    public func note(_ text: String) {
        if !global.json { terminal.err(text + "\n") }
    }
}

/// Runs a command body and turns every error into the user-safe presentation (docs/errors.md).
enum CommandRunner {
    /// `unlockOnDemand`: a locked account met on a terminal asks for its PIN and the body runs
    /// again (docs/commands.md, "Unlock on demand"); `login` opts out (it would ask for the
    /// password again).
    /// `adjust` may reword an error before it is reported (a command's own hint).
    static func run(
        _ global: GlobalOptions, unlockOnDemand: Bool = true,
        adjust: (OStackError) -> OStackError = { $0 }, _ body: (CommandContext) async throws -> Void
    ) async throws {
        try global.checkOutputFormat()
        let context = CommandContext.live(global: global)
        // A keyring call that outlives its deadline by 10 s (its provider crashed mid-call) ends the
        // process with this, as `keyring-timeout` reports itself.
        SecretServiceKeyring.setHangReport(hangReport(context))
        do {
            try context.checkEnvironment()
        } catch {
            // Nothing is written, the debug log neither: it would go to the default directories.
            throw ExitCode(report(error, context: context, logging: false))
        }
        var unlocked: Set<String> = []
        OutputFilter.begin(context.global)
        defer { _ = OutputFilter.end() }
        do {
            while true {
                let printed = Terminal.stdoutWrites
                do {
                    try await body(context)
                    if let document = OutputFilter.end() { try OutputFilter.finish(document, context: context) }
                    break
                } catch let error as OStackError
                    where error.code == .locked && unlockOnDemand && context.canPrompt
                    && error.context.account.map({ !unlocked.contains($0) }) == true
                    // Run again only a command that has printed nothing yet (no output twice).
                    && Terminal.stdoutWrites == printed
                {
                    let alias = error.context.account!
                    try context.unlockOnDemand(alias, because: error)
                    unlocked.insert(alias)
                    _ = OutputFilter.end()
                    OutputFilter.begin(context.global)
                }
            }
            Pager.finish()
        } catch let exit as ExitCode {
            Pager.finish()
            throw exit
        } catch let error as CleanExit {
            Pager.finish()
            throw error
        } catch let error as OStackError {
            Pager.finish()
            throw ExitCode(report(adjust(error), context: context))
        } catch {
            Pager.finish()
            throw ExitCode(report(error, context: context))
        }
    }

    /// A server that cannot be reached (or not in time, or not securely) through a proxy: the hint
    /// names the variable the proxy comes from. ostack reaches `https` servers through the proxy
    /// in `https_proxy`, `HTTPS_PROXY`, `all_proxy` or `ALL_PROXY` (curl's order) unless `NO_PROXY`
    /// names them; never a local one (`http` or loopback: CurlKit's `HTTPClient`).
    /// `scheme`: the server's, when known (a registered account's); `https` otherwise, as almost
    /// every server is. Decided as the HTTP client decides (`ProxyUse`): a LAN server over https does
    /// use the proxy (it had no note), a plain-http one never does (it was said to).
    static func proxyNote(_ error: OStackError, environment: [String: String], scheme: String = "https") -> String? {
        guard [.offline, .timeout, .tls].contains(error.code), let authority = error.context.host else { return nil }
        let host = ServerURL.host(ofAuthority: authority)
        guard ProxyUse.applies(scheme: scheme, host: host.contains(":") ? "[\(host)]" : host) else { return nil }
        guard let variable = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].first(where: {
            !(environment[$0] ?? "").isEmpty
        }) else { return nil }
        return "Requests to it go through the proxy in \(variable) (unless NO_PROXY names it), as curl's do: check the proxy too."
    }

    /// A storage failure while a file system holding ostack's files has less than 1 MiB free is
    /// `storage-full`: a full disk reaches ostack as many different failures (a journal or
    /// registry write, SQLite's I/O errors), not all of which name it.
    static func namingAFullDisk(
        _ error: any Error, layout: FileLayout, freeSpace: (String) -> Int? = Doctor.availableBytes
    ) -> any Error {
        guard let failure = error as? OStackError, failure.code == .storageFailure else { return error }
        let directories = [layout.dataDirectory, layout.configDirectory, layout.stateDirectory]
        guard directories.contains(where: { freeSpace($0).map { $0 < 1 << 20 } ?? false }) else { return error }
        return OStackError(.storageFull, context: failure.context, detail: failure.detail)
    }

    /// Prints the error and returns the exit code.
    static func report(_ error: any Error, context: CommandContext, logging: Bool = true) -> Int32 {
        let error = namingAFullDisk(error, layout: context.layout)
        let reference = referenceID()
        var presentation = ErrorPresenter().present(error, referenceID: reference)
        if let failure = error as? OStackError,
            let proxy = proxyNote(failure, environment: context.environment, scheme: serverScheme(failure, context))
        {
            presentation.hint = (presentation.hint.map { $0 + " " } ?? "") + proxy
        }
        let detail = (error as? OStackError)?.description ?? "unexpected \(type(of: error))"
        if logging { context.debugLog.append(referenceID: reference, code: presentation.code, detail: detail) }
        var message = presentation.message
        if context.global.verbose, let ostack = error as? OStackError {
            if let status = ostack.context.httpStatus { message += " (HTTP \(status))" }
            if let request = ostack.context.requestID {
                message += " (request \(ErrorPresenter.sanitize(request, maxLength: 64)))"
            }
        }
        if context.global.jsonErrors {
            let document = JSONOutput.ErrorDocument(
                error: .init(code: presentation.code, message: message, hint: presentation.hint))
            context.terminal.err(JSONOutput.encode(document) + "\n")
        } else {
            context.terminal.err("ostack: error: \(message)\n")
            if let hint = presentation.hint { context.terminal.err("ostack: hint: \(hint)\n") }
        }
        return presentation.exitCode
    }

    /// The scheme of the registered account's server the error names, if there is one.
    static func serverScheme(_ error: OStackError, _ context: CommandContext) -> String {
        guard let authority = error.context.host,
            let account = try? context.registry.accounts().first(where: { $0.server.authority == authority })
        else { return "https" }
        return account.server.scheme.rawValue
    }

    /// `keyring-timeout` as `report` would print it, for a keyring call that never returns.
    static func hangReport(_ context: CommandContext) -> String {
        let presentation = ErrorPresenter().present(
            OStackError(.keyringTimeout, detail: "a keyring call ignored its deadline"), referenceID: referenceID())
        if context.global.jsonErrors {
            let document = JSONOutput.ErrorDocument(
                error: .init(code: presentation.code, message: presentation.message, hint: presentation.hint))
            return JSONOutput.encode(document) + "\n"
        }
        return "ostack: error: \(presentation.message)\n" + (presentation.hint.map { "ostack: hint: \($0)\n" } ?? "")
    }

    /// 8 random characters that cannot be misread (no i, l, o, 0, 1).
    static func referenceID() -> String {
        RandomID.make(count: 8, alphabet: "abcdefghjkmnpqrstuvwxyz23456789")
    }
}
