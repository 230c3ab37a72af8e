//! Checks side by side: jobs in different lanes run at once; the jobs of
//! one lane (those that would wait on one cargo lock) run one after the
//! other, in plan order. Each is judged as it ends. When one fails, the jobs
//! after it in plan order are stopped through the runner (or never
//! started), while those before it run to their end: one of them may fail
//! too, and the refusal the gate reports is the first failure in plan order
//! ([`first_failure`]), whatever the order the jobs ended in.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::runner::{Ended, Launch, Runner, Running};

/// One job: the unit it runs in, what it runs, and its lane.
pub struct Job {
    pub unit: String,
    pub launch: Launch,
    pub lane: usize,
}

/// How a job that was started ended, or why it could not start.
pub type Ending<'a> = Result<(&'a Ended, &'a Running, f64), String>;

/// Runs `jobs` (in plan order) side by side by lane; `judge(index,
/// ending)` says whether job `index` passed. Returns the indices of the
/// jobs stopped (or never started) because one before them failed. `grace`
/// is the time a stopped job has between SIGTERM and SIGKILL.
pub async fn run_all(
    runner: &Runner,
    jobs: Vec<Job>,
    grace: Duration,
    mut judge: impl FnMut(usize, Ending<'_>) -> bool,
) -> Vec<usize> {
    let mut queued: Vec<Option<Job>> = jobs.into_iter().map(Some).collect();
    // (index, lane, the job, when it started)
    let mut live: Vec<(usize, usize, Running, Instant)> = Vec::new();
    let mut cut = queued.len();
    let mut stopped = Vec::new();
    loop {
        // Start the first waiting job of every idle lane.
        let mut busy: Vec<usize> = live.iter().map(|(_, lane, ..)| *lane).collect();
        for (index, slot) in queued.iter_mut().enumerate() {
            let Some(lane) = slot.as_ref().map(|j| j.lane) else { continue };
            if index > cut {
                *slot = None;
                stopped.push(index);
                continue;
            }
            if busy.contains(&lane) {
                continue;
            }
            busy.push(lane);
            let Some(job) = slot.take() else { continue };
            let started = Instant::now();
            match runner.start(&job.unit, job.launch).await {
                Ok(running) => live.push((index, lane, running, started)),
                Err(e) => {
                    if !judge(index, Err(e.to_string())) {
                        cut = cut.min(index);
                    }
                }
            }
        }
        let live_indices: Vec<usize> = live.iter().map(|(i, ..)| *i).collect();
        for index in to_stop(cut, &live_indices) {
            if let Some(at) = live.iter().position(|(i, ..)| *i == index) {
                let (_, _, mut running, _) = live.remove(at);
                running.stop(grace).await;
                stopped.push(index);
            }
        }
        if live.is_empty() {
            if queued.iter().all(Option::is_none) {
                break;
            }
            continue;
        }
        let (at, ended) = wait_any(&mut live).await;
        let (index, _, running, started) = live.remove(at);
        let seconds = started.elapsed().as_secs_f64();
        if !judge(index, Ok((&ended, &running, seconds))) {
            cut = cut.min(index);
        }
    }
    stopped.sort_unstable();
    stopped
}

/// Which of the `live` jobs to stop once the job at `cut` failed (`cut`
/// is the count of jobs when none failed): those after it in plan order.
pub fn to_stop(cut: usize, live: &[usize]) -> Vec<usize> {
    live.iter().copied().filter(|&i| i > cut).collect()
}

/// The refusal to report: the first job in plan order that failed, among
/// `passed` (`None`: stopped or not run).
pub fn first_failure(passed: &[Option<bool>]) -> Option<usize> {
    passed.iter().position(|p| *p == Some(false))
}

/// Waits for the first of `live` to end; returns its place and its end.
/// The others' waits are dropped, which [`Running::wait`] allows.
async fn wait_any(live: &mut [(usize, usize, Running, Instant)]) -> (usize, Ended) {
    let mut waits: Vec<Pin<Box<dyn Future<Output = Ended> + '_>>> =
        live.iter_mut().map(|(_, _, running, _)| Box::pin(running.wait()) as Pin<Box<_>>).collect();
    std::future::poll_fn(|cx| {
        for (at, wait) in waits.iter_mut().enumerate() {
            if let Poll::Ready(ended) = wait.as_mut().poll(cx) {
                return Poll::Ready((at, ended));
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests;
