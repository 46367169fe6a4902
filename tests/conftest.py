import os

from hypothesis import HealthCheck, settings

# Model builds are slow-ish compared with hypothesis's default deadline.
settings.register_profile("sandbox", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sandbox"))
