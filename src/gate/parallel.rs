//! Checks side by side: every job is started at once (in plan order), and
//! each is judged as it ends. When one fails, the jobs after it in plan
//! order are stopped through the runner, while those before it run to
//! their end: one of them may fail too, and the refusal the gate reports
//! is the first failure in plan order ([`first_failure`]), whatever the
//! order the jobs ended in.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::runner::{Ended, Launch, Runner, Running};

/// One job: the unit it runs in and what it runs.
pub struct Job {
    pub unit: String,
    pub launch: Launch,
}

/// How a job that was started ended, or why it could not start.
pub type Ending<'a> = Result<(&'a Ended, &'a Running, f64), String>;

/// Runs `jobs` side by side; `judge(index, ending)` says whether job
/// `index` passed. Returns the indices of the jobs stopped (or never
/// started) because one before them failed. `grace` is the time a stopped
/// job has between SIGTERM and SIGKILL.
pub async fn run_all(
    runner: &Runner,
    jobs: Vec<Job>,
    grace: Duration,
    mut judge: impl FnMut(usize, Ending<'_>) -> bool,
) -> Vec<usize> {
    let mut live: Vec<(usize, Running, Instant)> = Vec::new();
    let mut cut = jobs.len();
    let mut stopped = Vec::new();
    for (index, job) in jobs.into_iter().enumerate() {
        if index > cut {
            stopped.push(index);
            continue;
        }
        let started = Instant::now();
        match runner.start(&job.unit, job.launch).await {
            Ok(running) => live.push((index, running, started)),
            Err(e) => {
                if !judge(index, Err(e.to_string())) {
                    cut = index;
                }
            }
        }
    }
    loop {
        let live_indices: Vec<usize> = live.iter().map(|(i, ..)| *i).collect();
        for index in to_stop(cut, &live_indices) {
            if let Some(at) = live.iter().position(|(i, ..)| *i == index) {
                let (_, mut running, _) = live.remove(at);
                running.stop(grace).await;
                stopped.push(index);
            }
        }
        if live.is_empty() {
            break;
        }
        let (at, ended) = wait_any(&mut live).await;
        let (index, running, started) = live.remove(at);
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
async fn wait_any(live: &mut [(usize, Running, Instant)]) -> (usize, Ended) {
    let mut waits: Vec<Pin<Box<dyn Future<Output = Ended> + '_>>> =
        live.iter_mut().map(|(_, running, _)| Box::pin(running.wait()) as Pin<Box<_>>).collect();
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
