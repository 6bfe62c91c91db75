//! The engine's side of the simulation: jobs arrive, take dispatch
//! permits, synthesize and submit their items; cancellation gives up
//! their tickets and queued items.

use std::cmp::Reverse;

use super::{Ev, Payload, Sim, SimStage};
use crate::GpuSchedError;
use crate::core::{ItemEnd, WorkerId};

impl Sim<'_> {
    pub(super) fn arrive(&mut self, j: usize) {
        let job = &self.jobs[j];
        let id = self.core.create_job(job.priority);
        self.ids[j] = Some(id);
        self.unsynthesized[j] = job.items.len();
        if job.items.is_empty() {
            self.core.close(id);
        }
        if let Some(at) = job.cancel_at {
            self.at(at.max(self.now), Ev::Cancel(j));
        }
        for p in 0..job.items.len() as u32 {
            self.request_permit(j, p);
        }
    }

    fn request_permit(&mut self, j: usize, p: u32) {
        let priority = self.jobs[j].priority;
        match &mut self.permits {
            None => self.start_synth(j, p),
            Some(permits) => {
                let ticket = permits.request(priority);
                if permits.take_grant(ticket) {
                    self.start_synth(j, p);
                } else {
                    self.tickets.insert(ticket, (j, p));
                }
            }
        }
    }

    fn start_synth(&mut self, j: usize, p: u32) {
        self.in_flight += 1;
        self.report.max_in_flight = self.report.max_in_flight.max(self.in_flight);
        if let Some(bound) = self.setup.bound
            && self.in_flight > bound
        {
            self.violation(format!(
                "{} in flight over a bound of {bound}",
                self.in_flight
            ));
        }
        self.report.synth_starts.push(self.now);
        let synth = self.item(j, p).synth;
        self.at(self.now + synth, Ev::SynthDone(j, p));
    }

    pub(super) fn release_permit(&mut self) {
        self.in_flight -= 1;
        let Some(permits) = &mut self.permits else {
            return;
        };
        if let Some(ticket) = permits.release() {
            permits.take_grant(ticket);
            if let Some((j, p)) = self.tickets.remove(&ticket) {
                self.start_synth(j, p);
            }
        }
    }

    fn leave_synthesis(&mut self, j: usize) {
        self.unsynthesized[j] -= 1;
        if self.unsynthesized[j] == 0 {
            self.core.close(self.id(j));
        }
    }

    pub(super) fn synth_done(&mut self, j: usize, p: u32) {
        let id = self.id(j);
        if self.core.is_cancelled(id) {
            self.report.tallies[j].cancelled += 1;
            self.release_permit();
            self.leave_synthesis(j);
            return;
        }
        let bytes = self.item(j, p).bytes;
        match self.core.submit(
            id,
            p,
            bytes,
            Payload {
                job: j,
                partition: p,
            },
        ) {
            Ok(()) => {
                self.queued
                    .insert((Reverse(self.jobs[j].priority), id, p), bytes);
                self.report.submitted_at.insert((j, p), self.now);
            }
            Err((GpuSchedError::ItemNeverFits { need_bytes, .. }, _)) => {
                let largest = (0..self.setup.capacities.len())
                    .map(|d| self.usable(d))
                    .max()
                    .unwrap_or(0);
                if need_bytes <= largest {
                    self.violation(format!("{need_bytes} bytes refused but {largest} usable"));
                }
                self.report.tallies[j].refused += 1;
                self.release_permit();
            }
            Err((error, _)) => self.violation(format!("unexpected refusal: {error}")),
        }
        self.leave_synthesis(j);
    }

    pub(super) fn removed(&mut self, j: usize, removed: Vec<Payload>) {
        let count = removed.len();
        for payload in removed {
            let key = (
                Reverse(self.jobs[j].priority),
                self.id(j),
                payload.partition,
            );
            if self.queued.remove(&key).is_none() {
                self.violation(format!("{key:?} removed but not queued"));
            }
            self.report.tallies[j].cancelled += 1;
            self.release_permit();
        }
        self.core.payloads_dropped(self.id(j), count);
    }

    pub(super) fn cancel(&mut self, j: usize) {
        let removed = self.core.cancel(self.id(j));
        self.removed(j, removed);
        self.job_cancelled(j);
    }

    /// What the engine and the workers do when a job is cancelled: give up
    /// its permit tickets, and leave the kernel lock's queue.
    pub(super) fn job_cancelled(&mut self, j: usize) {
        self.cancelled[j] = true;
        let priority = self.jobs[j].priority;
        let tickets: Vec<u64> = self
            .tickets
            .iter()
            .filter(|(_, (job, _))| *job == j)
            .map(|(&t, _)| t)
            .collect();
        for ticket in tickets {
            self.tickets.remove(&ticket);
            self.report.tallies[j].cancelled += 1;
            self.leave_synthesis(j);
            let granted = self
                .permits
                .as_mut()
                .and_then(|permits| permits.withdraw(priority, ticket));
            if let Some(granted) = granted {
                if let Some(permits) = &mut self.permits {
                    permits.take_grant(granted);
                }
                if let Some((jj, pp)) = self.tickets.remove(&granted) {
                    self.start_synth(jj, pp);
                }
            }
        }
        let waiting: Vec<WorkerId> = (0..self.stage.len())
            .filter(|&w| {
                self.stage[w].0 == SimStage::Waiting
                    && self.running.get(&w).is_some_and(|p| p.job == j)
            })
            .collect();
        for w in waiting {
            self.end_item(w, ItemEnd::Cancelled);
        }
    }
}
