import ArgumentParser
import OStackCore

/// Dynamic shell completions (`completion: .custom`, called by the scripts of `ostack completion
/// bash|zsh|fish` through `ostack ---completion …`): account aliases, object names, queue entry ids
/// and conflict ids. Local files only — the registry, and for names the account's database when its
/// key is at hand (keyring, or the agent for an unlocked PIN account) — never the network, never a
/// prompt (`--no-input`), and any failure (locked, no account, no database yet) offers nothing.
enum ShellCompletions {
    static let accounts = CompletionKind.custom { _, _, prefix in matching(prefix, accountAliases()) }
    static let objects = CompletionKind.custom { words, _, prefix in matching(prefix, localNames(words).objects) }
    static let queueEntries = CompletionKind.custom { words, _, prefix in
        matching(prefix, localNames(words).queueEntries)
    }
    static let conflicts = CompletionKind.custom { words, _, prefix in matching(prefix, localNames(words).conflicts) }

    static func matching(_ prefix: String, _ candidates: [String]) -> [String] {
        candidates.filter { $0.hasPrefix(prefix) }
    }

    /// A context that never prompts, for the account named by `--account` among the shell words.
    static func context(_ words: [String]) -> CommandContext {
        CommandContext.live(global: .unparsed(account: accountFlag(in: words), noInput: true, noColor: true))
    }

    /// `context(words)`, unless its environment is refused (a relative `OSTACK_HOME`): then nothing
    /// is offered, rather than the names of the default directories' accounts.
    static func usableContext(_ words: [String]) -> CommandContext? {
        let context = context(words)
        return (try? context.checkEnvironment()) == nil ? nil : context
    }

    /// The value of `--account VALUE` or `--account=VALUE` in the words typed so far.
    static func accountFlag(in words: [String]) -> String? {
        var value: String?
        for (index, word) in words.enumerated() {
            if word.hasPrefix("--account=") {
                value = String(word.dropFirst("--account=".count))
            } else if word == "--account", index + 1 < words.count {
                value = words[index + 1]
            }
        }
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }

    static func accountAliases() -> [String] {
        guard let context = usableContext([]) else { return [] }
        return (try? context.registry.accounts().map(\.alias)) ?? []
    }

    static func localNames(_ words: [String]) -> LocalNames {
        guard var context = usableContext(words) else { return LocalNames() }
        context.countsAsUse = false  // completing is not using the account (its file-keyring key neither)
        guard let account = try? context.selectedAccount().account,
            let environment = try? context.makeAuthEnvironment(context)
        else { return LocalNames() }
        return (try? LocalNames.read(account, environment: environment)) ?? LocalNames()
    }
}
