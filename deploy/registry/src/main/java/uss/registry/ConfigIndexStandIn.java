package uss.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.ArrayList;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/**
 * The bean that Apicurio's config-index extension generates at build time (the list of its
 * dynamic settings), whose build half is not on Maven Central: an empty list, so the settings
 * keep their static values.
 */
@ApplicationScoped
public class ConfigIndexStandIn {
    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList properties() {
        return new DynamicConfigPropertyList(new ArrayList<>());
    }
}
