// The Repo capability's wiring: Repo events feed the Repo controller, which wakes only the
// Sandboxes a change concerns; the caches' mounts and Ready holds ride the Sandbox controller.
import { Capability } from "pepr";
import { RepoModel } from "../../api/crd";
import { sandboxController } from "../sandbox";
import { RepoController } from "./controller";

export const repoController = new RepoController(sandboxController);

export const RepoCapability = new Capability({
  name: "repo",
  description: "Keeps each Repo's identity and wakes the Sandboxes whose node caches changed",
});

const { When } = RepoCapability;

When(RepoModel)
  .IsCreatedOrUpdated()
  .Watch((repo) => repoController.onRepo(repo, false));
When(RepoModel)
  .IsDeleted()
  .Watch((repo) => repoController.onRepo(repo, true));
