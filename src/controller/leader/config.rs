//! The leader-election settings and the rules they must keep.

use std::time::Duration;

/// Leader election settings, with client-go's meaning and defaults.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// How long a follower waits, after it last saw the Lease change, before
    /// it takes over (written to the Lease in whole seconds). Default 15 s.
    pub duration: Duration,
    /// How long the leader keeps leading without a successful renewal; past
    /// it, it stops acting. Default 10 s.
    pub renew_deadline: Duration,
    /// How often the leader renews and a follower tries. Default 2 s.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// The Lease `namespace/name` with the default timing (15 s, 10 s, 2 s).
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> LeaseConfig {
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the timing as client-go does (the lease duration exceeds the
    /// renew deadline, which exceeds 1.2 retry periods, which exceed zero),
    /// and that a request sent just before the renew deadline ends before
    /// any other candidate can take over (`api_timeout` shorter than lease
    /// duration − renew deadline).
    pub fn check(&self, api_timeout: Duration) -> Result<(), TimingError> {
        let whole = Duration::from_secs(self.duration.as_secs());
        if whole.is_zero() {
            return Err(TimingError::LeaseDuration);
        }
        if self.renew_deadline.is_zero() || self.renew_deadline >= whole {
            return Err(TimingError::RenewDeadline);
        }
        let retry = self.retry_period;
        if retry.is_zero()
            || retry.mul_f64(crate::controller::leader::campaign::JITTER_FACTOR)
                >= self.renew_deadline
        {
            return Err(TimingError::RetryPeriod);
        }
        if api_timeout.is_zero() || api_timeout >= whole - self.renew_deadline {
            return Err(TimingError::ApiTimeout);
        }
        Ok(())
    }
}

/// Which leader-election timing rule a configuration breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The lease duration is under one second.
    #[error("the lease duration must be at least 1s (the Lease counts whole seconds)")]
    LeaseDuration,
    /// The renew deadline is zero or not shorter than the lease duration.
    #[error("the renew deadline must be greater than zero and shorter than the lease duration")]
    RenewDeadline,
    /// The retry period is zero or 1.2 × it is not shorter than the renew deadline.
    #[error(
        "the retry period must be greater than zero and 1.2 × it shorter than the renew deadline"
    )]
    RetryPeriod,
    /// The request timeout does not fit between renew deadline and lease duration.
    #[error(
        "the API request timeout must be greater than zero and shorter than lease duration − renew deadline"
    )]
    ApiTimeout,
}

impl TimingError {
    /// A short, bounded reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            TimingError::LeaseDuration => "LeaseDuration",
            TimingError::RenewDeadline => "RenewDeadline",
            TimingError::RetryPeriod => "RetryPeriod",
            TimingError::ApiTimeout => "ApiTimeout",
        }
    }
}
