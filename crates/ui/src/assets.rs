//! The pages' files, compiled into the binary: nothing is fetched from anywhere else, and
//! nothing but cargo is needed to build them.
//!
//! - `style.css`: one style sheet for both pages (a grid of cards that folds into one column
//!   on a phone-sized window);
//! - `charts.js`: the charts, plain SVG drawn by a few hundred lines of script written here
//!   (linear or log axes with units, ticks that do not overlap, a legend, and the latest
//!   values as text beside every chart);
//! - `emu.html` + `emu.js`: the emulator's control panel; `gen.html` + `gen.js`: a generator
//!   run's live board.

use crate::server::{Page, Reply};

const STYLE: &str = include_str!("../assets/style.css");
const CHARTS: &str = include_str!("../assets/charts.js");
const EMU_HTML: &str = include_str!("../assets/emu.html");
const EMU_JS: &str = include_str!("../assets/emu.js");
const GEN_HTML: &str = include_str!("../assets/gen.html");
const GEN_JS: &str = include_str!("../assets/gen.js");
const ICON: &str = include_str!("../assets/icon.svg");

/// The file at `path` of `page`, if it has one.
pub fn serve(page: Page, path: &str) -> Option<Reply> {
    let (content_type, text) = match (page, path) {
        (Page::Emulator, "/") => ("text/html; charset=utf-8", EMU_HTML),
        (Page::Generator, "/") => ("text/html; charset=utf-8", GEN_HTML),
        (Page::Emulator, "/emu.js") => ("text/javascript; charset=utf-8", EMU_JS),
        (Page::Generator, "/gen.js") => ("text/javascript; charset=utf-8", GEN_JS),
        (_, "/charts.js") => ("text/javascript; charset=utf-8", CHARTS),
        (_, "/style.css") => ("text/css; charset=utf-8", STYLE),
        (_, "/icon.svg") => ("image/svg+xml", ICON),
        _ => return None,
    };
    Some(Reply {
        status: 200,
        content_type,
        body: text.as_bytes().to_vec(),
    })
}
