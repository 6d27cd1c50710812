import ArgumentParser
import OStackCore

/// `ostack lock [ACCOUNT|--all]` — wipes keys from the agent at once.
struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "Lock an account's local data now.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .long, help: "Lock every account.") var all = false

    func validate() throws {
        // `lock work --all` locked every account and said so: which one was meant is not clear.
        if all && (selection.target != nil || global.account != nil) {
            throw ValidationError("Pass an account (or --account) or --all, not both.")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            var context = context
            context.checksSettings = false  // locking works whatever config.json holds
            let service = try context.lockService()
            struct Document: Encodable {
                var account: AccountReference?
                var accounts: [AccountReference]?
                var locked = true
                /// Present (true) when the agent did not answer and was stopped.
                var agentStopped: Bool?
            }
            // An agent that took the request and never answered was killed: true, but not what was
            // asked, so said.
            let stopped =
                " The agent did not answer within \(Int(AgentClient.answerTimeout)) seconds and was stopped, so every account is locked."
            if all {
                let registered = try context.registry.accounts()
                let outcome = try service.lockAll(registered)
                let accounts = registered.map(AccountReference.init)
                context.emit(
                    json: Document(accounts: accounts, agentStopped: outcome == .agentStopped ? true : nil),
                    human: "Locked every account." + (outcome == .agentStopped ? stopped : ""))
                return
            }
            let account = try selection.account(context)
            let outcome = try service.lock(account)
            context.emit(
                json: Document(account: .init(account), agentStopped: outcome == .agentStopped ? true : nil),
                human: "Locked \(account.alias)." + (outcome == .agentStopped ? stopped : ""))
        }
    }
}

/// `ostack unlock [ACCOUNT] [--pin-stdin|--recovery-key|--recovery-key-stdin]`
struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock an account's local data with its PIN or recovery key.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .customLong("pin-stdin"), help: "Read the PIN from stdin.") var pinStdin = false
    @Flag(name: .customLong("recovery-key"), help: "Unlock with the recovery key, asked without echo.")
    var recoveryKey = false
    @Flag(name: .customLong("recovery-key-stdin"), help: "Read the recovery key from stdin.") var recoveryKeyStdin =
        false

    func validate() throws {
        if [pinStdin, recoveryKey, recoveryKeyStdin].filter({ $0 }).count > 1 {
            throw ValidationError("Use one of --pin-stdin, --recovery-key and --recovery-key-stdin.")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = try context.lockService()
            let account = try selection.account(context)
            // Before anything is asked or tried: the agent's directory, peer and socket path (#lock-3).
            try service.verifyAgent()
            if recoveryKey || recoveryKeyStdin {
                let name = ErrorPresenter.sanitize(account.alias, maxLength: 64)
                let text =
                    recoveryKeyStdin
                    ? try SecretInput.fromStdin()
                    : try SecretInput.prompt(
                        "Recovery key for \(name): ", noInput: global.noInput, flag: "--recovery-key-stdin")
                try service.unlock(account, recoveryKey: try RecoveryKey(parsing: text))
                context.emit(
                    json: UnlockDocument(account: .init(account)),
                    human: "Unlocked \(account.alias) with the recovery key. Set a new PIN: ostack pin set")
                return
            }
            // The state first: no prompt for a PIN that does not exist or no longer works (after the
            // agent's check above, which comes before everything).
            switch service.pinState(account) {
            case .none:
                throw OStackError(
                    .invalidInput,
                    context: .init(
                        suggestion: "Account \(account.alias) has no PIN: set one with \(command: .pinSet)."),
                    detail: "unlock without a PIN")
            case .lockedOut: throw service.missingPINError(account)
            case .set: break
            }
            let prompt = "PIN for \(ErrorPresenter.sanitize(account.alias, maxLength: 64)): "
            try service.unlock(account, pin: try PINInput(fromStdin: pinStdin, noInput: global.noInput).read(prompt))
            context.emit(json: UnlockDocument(account: .init(account)), human: "Unlocked \(account.alias).")
        }
    }

    struct UnlockDocument: Encodable {
        var account: AccountReference
        var unlocked = true
    }
}
