//! The strategy × fault matrix's files.
//!
//! | file | what |
//! |---|---|
//! | [`export`] | `matrix.json`, `matrix.csv`, `matrix.md` and the text pieces `lockbench matrix` prints |
//! | [`html`] | `matrix.html` |

pub mod export;
pub mod html;
