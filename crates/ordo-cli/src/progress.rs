//! A spinner for work that may take a while, which becomes a bar with counts and an estimate
//! of the time left once the work knows how much of it there is ([`set_counts`]): it appears
//! only once the work has run for a second, and never when stderr is not a terminal.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs `work`, showing `message` with a spinner if it lasts more than a second. `work` may
/// update the message through the bar it is given.
pub fn with_spinner<T>(message: &str, work: impl FnOnce(&ProgressBar) -> T) -> T {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
    );
    bar.set_message(message.to_string());
    // `finished` is read and the bar shown under one lock, and set and the bar cleared under the
    // same lock, so the spinner can never be shown after the work is over.
    let finished = Arc::new(Mutex::new(false));
    {
        let (bar, finished) = (bar.clone(), Arc::clone(&finished));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            let finished = finished.lock().unwrap_or_else(|e| e.into_inner());
            if !*finished {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                bar.enable_steady_tick(Duration::from_millis(100));
            }
        });
    }
    let result = work(&bar);
    let mut finished = finished.lock().unwrap_or_else(|e| e.into_inner());
    *finished = true;
    bar.finish_and_clear();
    result
}

/// Shows `done` of `total` steps on `bar` (from [`with_spinner`]), with the time left that the
/// rate so far gives; the message stays. A new total starts a new count (a new phase).
pub fn set_counts(bar: &ProgressBar, done: usize, total: usize) {
    let total = total.max(done) as u64;
    if bar.length() != Some(total) {
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} [{bar:20}] {pos}/{len} [{elapsed}, about {eta} left]",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_length(total);
        bar.reset_eta();
    }
    bar.set_position(done as u64);
}

/// Reports `auto`'s progress on `bar`: what it is doing, the best step so far, and the count
/// of its phase (placers, then the search's simulations).
pub fn show_auto(bar: &ProgressBar, progress: &ordo::AutoProgress) {
    let best =
        progress.best_us.map_or(String::new(), |us| format!(", best {:.2} ms", us as f64 / 1e3));
    bar.set_message(format!("auto: {}{best}", progress.doing));
    set_counts(bar, progress.done, progress.total);
}
