import OStackCore
import PlatformKit

extension CommandContext {
    /// Builds the real dependencies from the process environment. The only place that does.
    public static func live(global: GlobalOptions) -> CommandContext {
        var global = global
        global.explicitJSON = global.json || global.format == .json
        global.json = global.wantsJSON
        let environment = ProcessEnvironment.current()
        let layout = FileLayout(
            environment: environment, userID: ProcessEnvironment.userID,
            // The password database only when HOME does not say (it costs an NSS lookup at every start).
            homeDirectory: environment["HOME"]?.hasPrefix("/") == true ? nil : ProcessEnvironment.passwordHomeDirectory)
        return CommandContext(
            global: global, environment: environment,
            terminal: Terminal(environment: environment, noColorFlag: global.noColor, format: global.format),
            layout: layout,
            makeAuthEnvironment: LiveDependencies.authEnvironment)
    }

    /// `OSTACK_HOME` must be absolute: a relative one was ignored, and every command quietly used
    /// the default directories instead (another set of accounts) — the user's own, not the
    /// sandbox they meant. Empty counts as unset.
    public func checkEnvironment() throws(OStackError) {
        guard let home = environment["OSTACK_HOME"], !home.isEmpty, !home.hasPrefix("/") else { return }
        throw OStackError(
            .invalidInput,
            context: .init(
                suggestion:
                    "OSTACK_HOME must be an absolute path; it is relative here. Nothing was done: give its full path, or unset it for the default directories."
            ), detail: "relative OSTACK_HOME")
    }
}
