//! latlab-ui: the live pages `--ui ADDR` serves in a browser, with no asset from elsewhere.
//!
//! - [`server`]: [`UiServer`], one thread's HTTP server (tiny_http) that guards every request
//!   before a page's handler sees it: the `Host` header must name the address served (no DNS
//!   rebinding), every `/api/` request must carry the run's token (a page from elsewhere cannot
//!   read or change anything), and no answer carries a CORS header. It serves the page's HTML,
//!   its script and the shared style and charts itself, from [`assets`].
//! - [`assets`]: the pages (`emu`, `gen`), their scripts, the charts (plain SVG, written here)
//!   and the style sheet, compiled into the binary.
//! - [`gen`]: [`GenBoard`], what `latlab gen --ui` shows: the run's percentiles with their
//!   intervals as they grow, the CCDF, loss and reorder counts, the sender's lag, and after the
//!   run its final figures and written files.
//!
//! The emulator's page (`latlab emu|run|shell --ui`) is served by `latlab-emu`'s `panel` on
//! this server, since its changes go through the emulator's own path.

#![forbid(unsafe_code)]

pub mod assets;
pub mod gen;
pub mod server;

pub use gen::GenBoard;
pub use server::{Page, Reply, UiRequest, UiServer, DEFAULT_ADDR};
