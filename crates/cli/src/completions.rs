//! `latlab completions SHELL`: a completion script for bash, zsh or fish on stdout, generated
//! by `clap_complete` from the same clap definitions as `--help`.

use anyhow::Result;

#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete latlab's commands and flags in.
    #[arg(value_enum, value_name = "SHELL")]
    shell: Shell,
}

/// The shells latlab's package installs a completion script for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub(crate) fn run(a: CompletionsArgs) -> Result<()> {
    use clap_complete::shells;
    let mut cmd = crate::command();
    let mut script = Vec::new();
    match a.shell {
        Shell::Bash => clap_complete::generate(shells::Bash, &mut cmd, "latlab", &mut script),
        Shell::Zsh => clap_complete::generate(shells::Zsh, &mut cmd, "latlab", &mut script),
        Shell::Fish => clap_complete::generate(shells::Fish, &mut cmd, "latlab", &mut script),
    }
    out!("{}", String::from_utf8_lossy(&script));
    Ok(())
}
