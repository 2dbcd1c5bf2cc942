//! `latlab man [DIR]`: a man page for `latlab` and one for each of its subcommands, rendered
//! by `clap_mangen` from the same clap definitions as `--help`, so the two never disagree.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// The folder to write the pages to (made if missing): latlab.1, latlab-emu.1,
    /// latlab-study-bufferbloat.1, ...
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

pub(crate) fn run(a: ManArgs) -> Result<()> {
    let pages = pages()?;
    write_pages(&a.dir, &pages)
        .with_context(|| format!("cannot write the man pages to {}", a.dir.display()))?;
    outln!("wrote {} man pages to {}", pages.len(), a.dir.display());
    Ok(())
}

/// One rendered page: its file name (`latlab-study-bufferbloat.1`) and its roff text.
#[derive(Debug)]
struct Page {
    file: String,
    roff: Vec<u8>,
}

/// Every page, the command's own first: one per command of the tree but `help` (each page
/// lists the subcommands below it, as `latlab-study-bufferbloat(1)`).
fn pages() -> Result<Vec<Page>> {
    let mut root = crate::command().disable_help_subcommand(true);
    // Building names every subcommand after its path (`latlab-study-bufferbloat`).
    root.build();
    let mut pages = Vec::new();
    render(&root, &mut pages)?;
    Ok(pages)
}

fn render(cmd: &clap::Command, pages: &mut Vec<Page>) -> Result<()> {
    // Every page's footer names latlab and its version, a subcommand's too (clap gives only
    // the top command a version).
    let man = clap_mangen::Man::new(cmd.clone())
        .source(concat!("latlab ", env!("CARGO_PKG_VERSION")))
        .manual("latlab manual");
    let mut roff = Vec::new();
    man.render(&mut roff)
        .with_context(|| format!("rendering the man page of {}", cmd.get_name()))?;
    pages.push(Page {
        file: man.get_filename(),
        roff,
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render(sub, pages)?;
    }
    Ok(())
}

/// Makes `dir` and writes every page into it.
fn write_pages(dir: &Path, pages: &[Page]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for page in pages {
        std::fs::write(dir.join(&page.file), &page.roff)?;
    }
    Ok(())
}
